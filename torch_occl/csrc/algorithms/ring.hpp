// Ring algorithms: each step sends one segment to the next rank and receives one from the
// previous, so every link carries (n-1)/n of the data: bandwidth-optimal for large messages.
// A ring is the whole group or a part of it (hierarchical.hpp: the ranks of one host, or one
// rank of each host); segment i is the one its i-th member ends with.
#pragma once

#include "algorithms.hpp"

#include <vector>

namespace occl::algorithms {

// A buffer cut into mesh.size() consecutive segments; offsets in elements, offsets.back() = total.
struct Segments {
  std::vector<size_t> offsets;

  static Segments even(size_t total, int parts);  // sizes differ by at most one element
  static Segments blocks(size_t block, int parts);
  size_t begin(int i) const { return offsets[i]; }
  size_t count(int i) const { return offsets[i + 1] - offsets[i]; }
};

// The ranks of a ring, in ring order, and this rank's position among them.
struct Ring {
  std::vector<int> ranks;
  int position;

  static Ring whole(const Mesh& mesh);  // every rank of the group, in rank order
  // The same ranks in the same cyclic order, starting at `first` (one of them).
  Ring from(int first) const;
  int size() const { return static_cast<int>(ranks.size()); }
  int next() const { return ranks[(position + 1) % size()]; }
  int previous() const { return ranks[(position + size() - 1) % size()]; }
};

// The member at position p ends with segment p reduced over the ring in `output`; see
// ReduceBuffers.
void ring_reduce_scatter(Mesh& mesh, const Ring& ring, const ReduceBuffers& buffers,
                         const Segments& segments, Reduction reduction, Deadline deadline);

// Every member ends with every segment reduced over the ring: a reduce-scatter whose last step
// hands each reduced piece straight to the allgather.
void ring_allreduce(Mesh& mesh, const Ring& ring, char* data, const Segments& segments,
                    Reduction reduction, Deadline deadline);

// Segment p must be complete on the member at position p; every member ends with all segments.
void ring_allgather(Mesh& mesh, const Ring& ring, char* data, const Segments& segments,
                    size_t element_bytes, Deadline deadline);

// Returns once every member has entered; only they call it.
void barrier(Mesh& mesh, const Ring& members, Deadline deadline);

// The member at position 0 holds `bytes` of data; every other ends with them. They pass along
// the ring's order and stop at its last member, in pieces, each member taking in piece i while
// it passes piece i-1 on: a pipeline whose every link carries the data once.
void chain_broadcast(Mesh& mesh, const Ring& chain, char* data, size_t bytes, Deadline deadline);

// The two above over blocks that lie apart (hierarchical.cpp: a place's blocks of every host).
// blocks[p] holds the byte offsets (allgather) or element offsets (reduce-scatter) of the
// member at position p's blocks, each `block` bytes or elements long; every member lists as many.
void ring_allgather_blocks(Mesh& mesh, const Ring& ring, char* data,
                           const std::vector<std::vector<size_t>>& blocks, size_t block,
                           Deadline deadline);
// The member at position p ends with its blocks reduced over the ring in own[k], for its k-th
// block; partial sums of the other members' blocks go to `buffers.partial` at their offsets
// (buffers.output is unused).
void ring_reduce_scatter_blocks(Mesh& mesh, const Ring& ring, const ReduceBuffers& buffers,
                                const std::vector<std::vector<size_t>>& blocks,
                                const std::vector<char*>& own, size_t block,
                                Reduction reduction, Deadline deadline);

}  // namespace occl::algorithms
