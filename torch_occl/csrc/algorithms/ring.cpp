#include "ring.hpp"

#include "../tuning.hpp"

#include <algorithm>
#include <memory>

namespace occl::algorithms {
namespace {

int ring_index(int i, int n) { return ((i % n) + n) % n; }

}  // namespace

Segments Segments::even(size_t total, int parts) {
  Segments s;
  s.offsets.resize(parts + 1);
  for (int i = 0; i <= parts; ++i) s.offsets[i] = total * i / parts;
  return s;
}

Segments Segments::blocks(size_t block, int parts) {
  Segments s;
  s.offsets.resize(parts + 1);
  for (int i = 0; i <= parts; ++i) s.offsets[i] = block * i;
  return s;
}

void ring_reduce_scatter(Mesh& mesh, char* data, const Segments& segments, Reduction reduction,
                         Deadline deadline) {
  const int n = mesh.size();
  const int r = mesh.rank();
  const size_t element = kernels::element_size(reduction.dtype);
  size_t largest = 0;
  for (int i = 0; i < n; ++i) largest = std::max(largest, segments.count(i));
  // Every step moves its segment in the same number of pieces on every rank, and reduces each
  // piece while it is still in cache.
  const size_t chunk = std::max<size_t>(1, Tuning::get().pipeline_chunk_bytes / element);
  const size_t pieces = std::max<size_t>(1, (largest + chunk - 1) / chunk);
  const size_t per_piece = (largest + pieces - 1) / pieces;
  std::unique_ptr<char[]> incoming(new char[per_piece * element]);

  // The part [begin, end) of segment `s` that piece `p` covers (empty past the segment's end).
  auto piece_of = [&](int s, size_t p) {
    size_t begin = std::min(segments.count(s), p * per_piece);
    size_t end = std::min(segments.count(s), begin + per_piece);
    return std::make_pair(segments.begin(s) + begin, end - begin);
  };

  // Step s passes segment r-s-1 on and takes in segment r-s-2, so that after n-1 steps the
  // partial sums of segment r have visited every rank and end here.
  for (int step = 0; step < n - 1; ++step) {
    int send_segment = ring_index(r - step - 1, n);
    int recv_segment = ring_index(r - step - 2, n);
    for (size_t p = 0; p < pieces; ++p) {
      auto [send_at, send_count] = piece_of(send_segment, p);
      auto [recv_at, recv_count] = piece_of(recv_segment, p);
      char* recv_target = data + recv_at * element;
      mesh.exchange({{ring_index(r + 1, n), data + send_at * element, send_count * element}},
                    {{ring_index(r - 1, n), incoming.get(), recv_count * element}}, deadline);
      const void* sources[2] = {incoming.get(), recv_target};
      kernels::reduce(recv_target, sources, 2, recv_count, reduction.dtype, reduction.op);
    }
  }
}

void ring_allgather(Mesh& mesh, char* data, const Segments& segments, size_t element_bytes,
                    Deadline deadline) {
  const int n = mesh.size();
  const int r = mesh.rank();
  // Step s forwards segment r-s (own at step 0, then what just arrived) and takes in r-s-1.
  for (int step = 0; step < n - 1; ++step) {
    int send_segment = ring_index(r - step, n);
    int recv_segment = ring_index(r - step - 1, n);
    mesh.exchange({{ring_index(r + 1, n), data + segments.begin(send_segment) * element_bytes,
                    segments.count(send_segment) * element_bytes}},
                  {{ring_index(r - 1, n), data + segments.begin(recv_segment) * element_bytes,
                    segments.count(recv_segment) * element_bytes}},
                  deadline);
  }
}

}  // namespace occl::algorithms
