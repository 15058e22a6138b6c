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

Ring Ring::whole(const Mesh& mesh) {
  Ring ring{std::vector<int>(mesh.size()), mesh.rank()};
  for (int r = 0; r < mesh.size(); ++r) ring.ranks[r] = r;
  return ring;
}

Ring Ring::from(int first) const {
  const int n = size();
  const int shift = static_cast<int>(std::find(ranks.begin(), ranks.end(), first) - ranks.begin());
  Ring ring{std::vector<int>(n), ring_index(position - shift, n)};
  for (int i = 0; i < n; ++i) ring.ranks[i] = ranks[(shift + i) % n];
  return ring;
}

Segments Segments::blocks(size_t block, int parts) {
  Segments s;
  s.offsets.resize(parts + 1);
  for (int i = 0; i <= parts; ++i) s.offsets[i] = block * i;
  return s;
}

namespace {

// Every ring step moves its segment in the same number of pieces on every rank (pieces of
// segments that differ by an element or two still line up), so that each piece is reduced, and
// passed on, while it is still in cache.
struct Pieces {
  const Segments& segments;
  size_t count;      // pieces per segment
  size_t per_piece;  // elements

  // Pieces of at most Tuning::pipeline_chunk_bytes.
  static Pieces chunked(const Segments& s, size_t element_bytes) {
    const size_t chunk = std::max<size_t>(1, Tuning::get().pipeline_chunk_bytes / element_bytes);
    const size_t count = std::max<size_t>(1, (largest(s) + chunk - 1) / chunk);
    return {s, count, (largest(s) + count - 1) / count};
  }
  // Every segment in one piece.
  static Pieces whole(const Segments& s) { return {s, 1, largest(s)}; }

  static size_t largest(const Segments& s) {
    size_t most = 0;
    for (size_t i = 0; i + 1 < s.offsets.size(); ++i) most = std::max(most, s.count(i));
    return most;
  }

  // First element and element count of piece `p` of segment `s` (empty past the segment's end).
  std::pair<size_t, size_t> of(int s, size_t p) const {
    size_t begin = std::min(segments.count(s), p * per_piece);
    size_t end = std::min(segments.count(s), begin + per_piece);
    return {segments.begin(s) + begin, end - begin};
  }
};

// One piece of a reduce-scatter step: receive the previous rank's partial piece of
// `recv_segment` and fold it into ours, while sending ours of `send_segment` on. Step 0 sends
// from the input; later steps send the partial sums the step before wrote.
void reduce_step_piece(Mesh& mesh, const Ring& ring, const ReduceBuffers& buffers,
                       const Pieces& pieces, int step, size_t p, char* incoming,
                       Reduction reduction, Deadline deadline) {
  const int n = ring.size();
  const int r = ring.position;
  const size_t element = kernels::element_size(reduction.dtype);
  const int send_segment = ring_index(r - step - 1, n);
  const int recv_segment = ring_index(r - step - 2, n);
  auto [send_at, send_count] = pieces.of(send_segment, p);
  auto [recv_at, recv_count] = pieces.of(recv_segment, p);
  const char* send_from = (step == 0 ? buffers.input : buffers.partial) + send_at * element;
  char* target = recv_segment == r
                     ? buffers.output + (recv_at - pieces.segments.begin(r)) * element
                     : buffers.partial + recv_at * element;
  mesh.exchange({{ring.next(), send_from, send_count * element}},
                {{ring.previous(), incoming, recv_count * element}}, deadline);
  const void* sources[2] = {incoming, buffers.input + recv_at * element};
  kernels::reduce(target, sources, 2, recv_count, reduction.dtype, reduction.op);
}

// One piece of an allgather step: pass our complete piece of `send_segment` on and take in the
// previous rank's of `recv_segment`.
void gather_step_piece(Mesh& mesh, const Ring& ring, char* data, const Pieces& pieces,
                       int send_segment, int recv_segment, size_t p, size_t element,
                       Deadline deadline) {
  auto [send_at, send_count] = pieces.of(send_segment, p);
  auto [recv_at, recv_count] = pieces.of(recv_segment, p);
  mesh.exchange({{ring.next(), data + send_at * element, send_count * element}},
                {{ring.previous(), data + recv_at * element, recv_count * element}}, deadline);
}

// Reduce-scatter step s passes segment r-s-1 on and takes in segment r-s-2 (see
// reduce_step_piece), so that after n-1 steps the partial sums of segment r have visited every
// rank and end here. Allgather step s forwards segment r-s (own at step 0, then what just
// arrived) and takes in r-s-1.
int gather_send_segment(int r, int step, int n) { return ring_index(r - step, n); }
int gather_recv_segment(int r, int step, int n) { return ring_index(r - step - 1, n); }

}  // namespace

void ring_reduce_scatter(Mesh& mesh, const Ring& ring, const ReduceBuffers& buffers,
                         const Segments& segments, Reduction reduction, Deadline deadline) {
  const size_t element = kernels::element_size(reduction.dtype);
  const Pieces pieces = Pieces::chunked(segments, element);
  std::unique_ptr<char[]> incoming(new char[pieces.per_piece * element]);
  for (int step = 0; step < ring.size() - 1; ++step) {
    for (size_t p = 0; p < pieces.count; ++p) {
      reduce_step_piece(mesh, ring, buffers, pieces, step, p, incoming.get(), reduction,
                        deadline);
    }
  }
}

void ring_allgather(Mesh& mesh, const Ring& ring, char* data, const Segments& segments,
                    size_t element_bytes, Deadline deadline) {
  const int n = ring.size();
  const int r = ring.position;
  for (int step = 0; step < n - 1; ++step) {
    gather_step_piece(mesh, ring, data, Pieces::whole(segments), gather_send_segment(r, step, n),
                      gather_recv_segment(r, step, n), 0, element_bytes, deadline);
  }
}

void ring_allreduce(Mesh& mesh, const Ring& ring, char* data, const Segments& segments,
                    Reduction reduction, Deadline deadline) {
  const int n = ring.size();
  const int r = ring.position;
  const size_t element = kernels::element_size(reduction.dtype);
  const Pieces pieces = Pieces::chunked(segments, element);
  const ReduceBuffers in_place{data, data, data + segments.begin(r) * element};
  std::unique_ptr<char[]> incoming(new char[pieces.per_piece * element]);
  for (int step = 0; step < n - 2; ++step) {
    for (size_t p = 0; p < pieces.count; ++p) {
      reduce_step_piece(mesh, ring, in_place, pieces, step, p, incoming.get(), reduction,
                        deadline);
    }
  }
  // The last reduce-scatter step completes segment r piece by piece; each piece goes straight
  // on as the first allgather step's, while it is still in cache, instead of being read back
  // from memory in a separate pass.
  for (size_t p = 0; p < pieces.count; ++p) {
    reduce_step_piece(mesh, ring, in_place, pieces, n - 2, p, incoming.get(), reduction,
                      deadline);
    gather_step_piece(mesh, ring, data, pieces, gather_send_segment(r, 0, n),
                      gather_recv_segment(r, 0, n), p, element, deadline);
  }
  for (int step = 1; step < n - 1; ++step) {
    gather_step_piece(mesh, ring, data, Pieces::whole(segments),
                      gather_send_segment(r, step, n), gather_recv_segment(r, step, n), 0,
                      element, deadline);
  }
}

void barrier(Mesh& mesh, const Ring& members, Deadline deadline) {
  // Every member tells every other it arrived: none leaves before all have entered.
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> recvs;
  for (int peer : members.ranks) {
    if (peer == mesh.rank()) continue;
    sends.push_back({peer, nullptr, 0});
    recvs.push_back({peer, nullptr, 0});
  }
  mesh.exchange(sends, recvs, deadline);
}

void chain_broadcast(Mesh& mesh, const Ring& chain, char* data, size_t bytes,
                     Deadline deadline) {
  const int n = chain.size();
  const int position = chain.position;
  const size_t chunk = std::max<size_t>(1, Tuning::get().pipeline_chunk_bytes);
  const size_t pieces = (bytes + chunk - 1) / chunk;
  auto piece = [&](size_t i) {
    return std::make_pair(data + i * chunk, std::min(chunk, bytes - i * chunk));
  };
  for (size_t i = 0; i <= pieces; ++i) {
    std::vector<transport::SendOp> sends;
    std::vector<transport::RecvOp> recvs;
    const size_t forward = position == 0 ? i : i - 1;  // the first has nothing to wait for
    if (position < n - 1 && (position == 0 ? i < pieces : i >= 1)) {
      auto [at, size] = piece(forward);
      sends.push_back({chain.next(), at, size});
    }
    if (position > 0 && i < pieces) {
      auto [at, size] = piece(i);
      recvs.push_back({chain.previous(), at, size});
    }
    if (!sends.empty() || !recvs.empty()) mesh.exchange(sends, recvs, deadline);
  }
}

void ring_allgather_blocks(Mesh& mesh, const Ring& ring, char* data,
                           const std::vector<std::vector<size_t>>& blocks, size_t block,
                           Deadline deadline) {
  const int n = ring.size();
  const int r = ring.position;
  for (int step = 0; step < n - 1; ++step) {
    const auto& send = blocks[gather_send_segment(r, step, n)];
    const auto& recv = blocks[gather_recv_segment(r, step, n)];
    for (size_t k = 0; k < send.size(); ++k) {
      mesh.exchange({{ring.next(), data + send[k], block}},
                    {{ring.previous(), data + recv[k], block}}, deadline);
    }
  }
}

void ring_reduce_scatter_blocks(Mesh& mesh, const Ring& ring, const ReduceBuffers& buffers,
                                const std::vector<std::vector<size_t>>& blocks,
                                const std::vector<char*>& own, size_t block,
                                Reduction reduction, Deadline deadline) {
  const int n = ring.size();
  const int r = ring.position;
  const size_t element = kernels::element_size(reduction.dtype);
  // In pieces, as the contiguous ring does, so each is reduced while in cache.
  const size_t piece = std::max<size_t>(1, Tuning::get().pipeline_chunk_bytes / element);
  std::unique_ptr<char[]> incoming(new char[std::min(piece, block) * element]);
  for (int step = 0; step < n - 1; ++step) {
    const int send_member = ring_index(r - step - 1, n);
    const int recv_member = ring_index(r - step - 2, n);
    for (size_t k = 0; k < blocks[send_member].size(); ++k) {
      for (size_t at = 0; at < block; at += piece) {
        const size_t count = std::min(piece, block - at);
        const size_t send_at = (blocks[send_member][k] + at) * element;
        const size_t recv_at = (blocks[recv_member][k] + at) * element;
        const char* send_from = (step == 0 ? buffers.input : buffers.partial) + send_at;
        mesh.exchange({{ring.next(), send_from, count * element}},
                      {{ring.previous(), incoming.get(), count * element}}, deadline);
        char* target = recv_member == r ? own[k] + at * element : buffers.partial + recv_at;
        const void* sources[2] = {incoming.get(), buffers.input + recv_at};
        kernels::reduce(target, sources, 2, count, reduction.dtype, reduction.op);
      }
    }
  }
}

}  // namespace occl::algorithms
