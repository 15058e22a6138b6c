// Single-copy algorithms, for groups whose ranks may copy straight from each other's memory
// (Mesh::peer_memory(): one host, cross-memory attach permitted).
//
// The ranks first swap the addresses of their buffers through the mesh. Each then copies what it
// needs directly out of the others' buffers (never into them: peer_memory.hpp says why): one
// kernel copy per byte, where a ring through shared memory takes two. A buffer in a segment the ranks allocated together
// (torch_occl.shared_empty, transport/shared_segments.hpp) is copied with memcpy through this
// rank's mapping of it instead, which is faster still. A closing barrier keeps every buffer alive
// and unchanged until the last peer is done with it.
#pragma once

#include "algorithms.hpp"
#include "ring.hpp"

#include "../transport/peer_buffer.hpp"

#include <cstddef>
#include <vector>

namespace occl::algorithms::single_copy {

// Whether these algorithms run for `bytes` per rank on `mesh` (a size every rank agrees on).
bool applies(const Mesh& mesh, size_t bytes);

// Same contracts as the functions of the same names in algorithms.hpp. alltoall runs whenever
// the mesh has peer memory and picks single copies slice by slice (the split sizes may differ
// from rank to rank; only the two ends of a slice agree on its size).
void allreduce(Mesh& mesh, char* data, size_t count, Reduction reduction, Deadline deadline);
void reduce(Mesh& mesh, char* data, size_t count, Reduction reduction, int root,
            Deadline deadline);
void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline);
void reduce_scatter_list(Mesh& mesh, const std::vector<const char*>& blocks, char* output,
                         size_t block_count, Reduction reduction, Deadline deadline);
void allgather(Mesh& mesh, char* data, size_t block_bytes, Deadline deadline);
void broadcast(Mesh& mesh, char* data, size_t bytes, int root, Deadline deadline);
void alltoall(Mesh& mesh, const std::vector<transport::SendOp>& sends,
              const std::vector<transport::RecvOp>& receives, Deadline deadline);
// alltoall's, with only the slices that gather, scatter or allgather_into move holding bytes.
void allgather_into(Mesh& mesh, const void* input, const std::vector<void*>& outputs,
                    size_t bytes, Deadline deadline);
void gather(Mesh& mesh, const void* data, const std::vector<void*>& blocks, size_t bytes,
            int root, Deadline deadline);
void scatter(Mesh& mesh, const std::vector<const void*>& blocks, void* data, size_t bytes,
             int root, Deadline deadline);

// The parts of the above, among some ranks of the group that `memory` reaches (hierarchical.hpp:
// a host's ranks, Mesh::host_memory); only they call these.
// Every member shows the others `data`; returns the others' buffers, at their group ranks.
std::vector<transport::PeerBuffer> share(Mesh& mesh, const transport::PeerMemory& memory,
                                         const Ring& members, const void* data, size_t bytes,
                                         Deadline deadline);

}  // namespace occl::algorithms::single_copy
