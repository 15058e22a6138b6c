// Ring algorithms: each step sends one segment to the next rank and receives one from the
// previous, so every link carries (n-1)/n of the data: bandwidth-optimal for large messages.
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

// Rank r ends with segment r reduced over all ranks in `output`; see ReduceBuffers.
void ring_reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, const Segments& segments,
                         Reduction reduction, Deadline deadline);

// Every rank ends with every segment reduced over all ranks: a reduce-scatter whose last step
// hands each reduced piece straight to the allgather.
void ring_allreduce(Mesh& mesh, char* data, const Segments& segments, Reduction reduction,
                    Deadline deadline);

// Segment r must be complete on rank r; every rank ends with all segments.
void ring_allgather(Mesh& mesh, char* data, const Segments& segments, size_t element_bytes,
                    Deadline deadline);

}  // namespace occl::algorithms
