// Collectives over a group that spans hosts, in two levels: within each host (its shared memory),
// then across hosts between the ranks that hold the same place on theirs, then within each host
// again. With L ranks a host, each rank sends 1/L of the data across hosts, all of them at once,
// and a host sends its sum once each way; a flat ring crosses only at the hosts' edges, with 1.5
// times those bytes on 2 hosts of 2 ranks, approaching twice as the group grows.
#pragma once

#include "algorithms.hpp"

namespace occl::algorithms::hierarchical {

// Whether the group spans two or more hosts with the same number of ranks, two or more, on each
// (Mesh::hosts), and OCCL_HIERARCHICAL is on: the same answer on every rank. The functions
// below then run in place of the flat rings and chain; they reduce partial sums more than once.
bool applies(const Mesh& mesh);

// As algorithms::allreduce: a ring reduce-scatter within the host, a ring allreduce of this
// rank's share across hosts, a ring allgather of the shares within the host.
void allreduce(Mesh& mesh, char* data, size_t count, Reduction reduction, Deadline deadline);

// As a large algorithms::broadcast: every rank of the root's host sends its share of the data
// (1/L of it) to the ranks at its place on the other hosts, all at once, and each host's ranks
// then take the others' shares from each other; the root's host takes the data from the root.
// Within a host by single copies where its ranks may (Mesh::host_memory), else through rings.
void broadcast(Mesh& mesh, char* data, size_t bytes, int root, Deadline deadline);

// As algorithms::allgather: across hosts, the blocks of the ranks at this rank's place; then
// within the host, every place's.
void allgather(Mesh& mesh, char* data, size_t block_bytes, Deadline deadline);

// As algorithms::reduce_scatter: within the host, each place's blocks summed over the host; then
// across hosts, this rank's block.
void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline);

}  // namespace occl::algorithms::hierarchical
