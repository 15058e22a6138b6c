#include "algorithms.hpp"

#include "ring.hpp"

#include <cstdlib>
#include <memory>
#include <string>

namespace occl::algorithms {
namespace {

size_t env_size(const char* name, size_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::stoull(value) : fallback;
}

// Small messages: one round in which every rank sends its whole buffer to every other rank, then
// each folds all contributions in rank order, so every rank computes the same bits.
void direct_allreduce(Mesh& mesh, void* data, size_t count, Reduction reduction,
                      Deadline deadline) {
  const int n = mesh.size();
  const int r = mesh.rank();
  const size_t bytes = count * kernels::element_size(reduction.dtype);
  std::unique_ptr<char[]> incoming(new char[bytes * n]);
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> recvs;
  std::vector<const void*> sources(n);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) {
      sources[peer] = data;
      continue;
    }
    sources[peer] = incoming.get() + bytes * peer;
    sends.push_back({peer, data, bytes});
    recvs.push_back({peer, incoming.get() + bytes * peer, bytes});
  }
  mesh.exchange(sends, recvs, deadline);
  kernels::reduce(data, sources.data(), n, count, reduction.dtype, reduction.op);
}

}  // namespace

const Tuning& Tuning::get() {
  static const Tuning tuning = [] {
    Tuning t;
    t.direct_allreduce_max_bytes =
        env_size("OCCL_DIRECT_ALLREDUCE_MAX_BYTES", t.direct_allreduce_max_bytes);
    return t;
  }();
  return tuning;
}

void allreduce(Mesh& mesh, void* data, size_t count, Reduction reduction, Deadline deadline) {
  const int n = mesh.size();
  if (n == 1 || count == 0) return;
  if (count * kernels::element_size(reduction.dtype) <= Tuning::get().direct_allreduce_max_bytes) {
    return direct_allreduce(mesh, data, count, reduction, deadline);
  }
  // Ring: reduce-scatter leaves segment r complete on rank r, allgather spreads the segments.
  Segments segments = Segments::even(count, n);
  ring_reduce_scatter(mesh, static_cast<char*>(data), segments, reduction, deadline);
  ring_allgather(mesh, static_cast<char*>(data), segments,
                 kernels::element_size(reduction.dtype), deadline);
}

void reduce_scatter(Mesh& mesh, void* data, size_t block_count, Reduction reduction,
                    Deadline deadline) {
  if (mesh.size() == 1 || block_count == 0) return;
  ring_reduce_scatter(mesh, static_cast<char*>(data), Segments::blocks(block_count, mesh.size()),
                      reduction, deadline);
}

void allgather(Mesh& mesh, void* data, size_t block_bytes, Deadline deadline) {
  if (mesh.size() == 1 || block_bytes == 0) return;
  ring_allgather(mesh, static_cast<char*>(data), Segments::blocks(block_bytes, mesh.size()), 1,
                 deadline);
}

void broadcast(Mesh& mesh, void* data, size_t bytes, int root, Deadline deadline) {
  if (mesh.size() == 1 || bytes == 0) return;
  if (mesh.rank() != root) return mesh.exchange({}, {{root, data, bytes}}, deadline);
  std::vector<transport::SendOp> sends;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer != root) sends.push_back({peer, data, bytes});
  }
  mesh.exchange(sends, {}, deadline);
}

void barrier(Mesh& mesh, Deadline deadline) {
  // Everyone tells everyone it arrived: no rank leaves before all have entered.
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> recvs;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer == mesh.rank()) continue;
    sends.push_back({peer, nullptr, 0});
    recvs.push_back({peer, nullptr, 0});
  }
  mesh.exchange(sends, recvs, deadline);
}

}  // namespace occl::algorithms
