#include "algorithms.hpp"

#include "hierarchical.hpp"
#include "ring.hpp"
#include "single_copy.hpp"

#include "../tuning.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace occl::algorithms {
namespace {

// Folds every rank's contribution in rank order, so every rank that does it gets the same bits:
// slots[r] holds rank r's contribution except slots[own], which this sets to `data`.
void fold_in_rank_order(void* data, std::vector<void*>& slots, int own, size_t count,
                        Reduction reduction) {
  slots[own] = data;
  kernels::reduce(data, slots.data(), static_cast<int>(slots.size()), count, reduction.dtype,
                  reduction.op);
}

// Small messages: one round in which every rank sends its whole buffer to every other rank.
void direct_allreduce(Mesh& mesh, void* data, size_t count, Reduction reduction,
                      Deadline deadline) {
  const int n = mesh.size();
  const size_t bytes = count * kernels::element_size(reduction.dtype);
  char* incoming = mesh.scratch(bytes * n);
  std::vector<void*> slots(n);
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> recvs;
  for (int peer = 0; peer < n; ++peer) {
    slots[peer] = incoming + bytes * peer;
    if (peer == mesh.rank()) continue;
    sends.push_back({peer, data, bytes});
    recvs.push_back({peer, slots[peer], bytes});
  }
  mesh.exchange(sends, recvs, deadline, transport::Records::Carried);
  fold_in_rank_order(data, slots, mesh.rank(), count, reduction);
}

// The direct algorithms send a rank's whole buffer to every other rank: worth it while that
// total stays small, so the cut-off shrinks as the group grows.
bool is_small(size_t count, Reduction reduction, int ranks) {
  return count * kernels::element_size(reduction.dtype) * (ranks - 1) <=
         Tuning::get().direct_allreduce_max_bytes;
}

// How a reduction runs: decided once per op, by the functions below, for the reduction itself
// and for rounds_once.
enum class Path { Nothing, Direct, SingleCopy, Ring, Hierarchical };

Path allreduce_path(const Mesh& mesh, size_t count, Reduction reduction) {
  const int n = mesh.size();
  if (n == 1 || count == 0) return Path::Nothing;
  if (is_small(count, reduction, n)) return Path::Direct;
  const size_t bytes = count * kernels::element_size(reduction.dtype);
  if (single_copy::applies(mesh, bytes)) return Path::SingleCopy;
  return hierarchical::applies(mesh) ? Path::Hierarchical : Path::Ring;
}

Path reduce_scatter_path(const Mesh& mesh, size_t block_count, Reduction reduction) {
  if (block_count == 0 || mesh.size() == 1) return Path::Nothing;
  const size_t input_bytes = block_count * kernels::element_size(reduction.dtype) * mesh.size();
  if (single_copy::applies(mesh, input_bytes)) return Path::SingleCopy;
  return hierarchical::applies(mesh) ? Path::Hierarchical : Path::Ring;
}

Path reduce_path(const Mesh& mesh, size_t count, Reduction reduction) {
  const int n = mesh.size();
  if (n == 1 || count == 0) return Path::Nothing;
  if (is_small(count, reduction, n)) return Path::Direct;
  const size_t bytes = count * kernels::element_size(reduction.dtype);
  return single_copy::applies(mesh, bytes) ? Path::SingleCopy : Path::Ring;
}

}  // namespace

bool rounds_once(const Mesh& mesh, Reducing what, size_t count, Reduction reduction) {
  const Path path = what == Reducing::AllReduce       ? allreduce_path(mesh, count, reduction)
                    : what == Reducing::ReduceScatter ? reduce_scatter_path(mesh, count, reduction)
                                                      : reduce_path(mesh, count, reduction);
  // A flat ring of two ranks meets both inputs in one kernel call; longer rings and the
  // hierarchy reduce partial sums again.
  if (path == Path::Hierarchical) return false;
  return path != Path::Ring || mesh.size() == 2;
}

void allreduce(Mesh& mesh, void* data, size_t count, Reduction reduction, Deadline deadline) {
  switch (allreduce_path(mesh, count, reduction)) {
    case Path::Nothing: return;
    case Path::Direct: return direct_allreduce(mesh, data, count, reduction, deadline);
    case Path::SingleCopy:
      return single_copy::allreduce(mesh, static_cast<char*>(data), count, reduction, deadline);
    case Path::Ring:
      return ring_allreduce(mesh, Ring::whole(mesh), static_cast<char*>(data),
                            Segments::even(count, mesh.size()), reduction, deadline);
    case Path::Hierarchical:
      return hierarchical::allreduce(mesh, static_cast<char*>(data), count, reduction, deadline);
  }
}

void reduce(Mesh& mesh, void* data, size_t count, Reduction reduction, int root,
            Deadline deadline) {
  const Path path = reduce_path(mesh, count, reduction);
  if (path == Path::Nothing) return;
  const int n = mesh.size();
  const size_t element = kernels::element_size(reduction.dtype);
  char* bytes = static_cast<char*>(data);
  if (path == Path::Direct) {
    // Everyone sends to the root, which folds in rank order.
    if (mesh.rank() != root) return mesh.exchange({{root, data, count * element}}, {}, deadline);
    char* incoming = mesh.scratch(count * element * n);
    std::vector<void*> slots(n);
    std::vector<transport::RecvOp> recvs;
    for (int peer = 0; peer < n; ++peer) {
      slots[peer] = incoming + count * element * peer;
      if (peer != root) recvs.push_back({peer, slots[peer], count * element});
    }
    mesh.exchange({}, recvs, deadline);
    return fold_in_rank_order(data, slots, root, count, reduction);
  }
  if (path == Path::SingleCopy) {
    return single_copy::reduce(mesh, bytes, count, reduction, root, deadline);
  }
  // Else a ring reduce-scatter spreads the arithmetic over all ranks, then the root collects
  // the reduced segments. The root's data takes the partial sums, the others' stay as they are.
  Segments segments = Segments::even(count, n);
  const int r = mesh.rank();
  std::unique_ptr<char[]> scratch(r == root ? nullptr : new char[count * element]);
  char* partial = r == root ? bytes : scratch.get();
  char* own_segment = partial + segments.begin(r) * element;
  ring_reduce_scatter(mesh, Ring::whole(mesh), {bytes, partial, own_segment}, segments, reduction,
                      deadline);
  if (r != root) {
    return mesh.exchange({{root, own_segment, segments.count(r) * element}}, {}, deadline);
  }
  std::vector<transport::RecvOp> recvs;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == root) continue;
    recvs.push_back({peer, bytes + segments.begin(peer) * element, segments.count(peer) * element});
  }
  mesh.exchange({}, recvs, deadline);
}

void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline) {
  if (block_count == 0) return;
  if (mesh.size() == 1) {
    kernels::reduce(buffers.output, reinterpret_cast<const void* const*>(&buffers.input), 1,
                    block_count, reduction.dtype, reduction.op);
    return;
  }
  const Path path = reduce_scatter_path(mesh, block_count, reduction);
  if (path == Path::SingleCopy) {
    return single_copy::reduce_scatter(mesh, buffers, block_count, reduction, deadline);
  }
  if (path == Path::Hierarchical) {
    return hierarchical::reduce_scatter(mesh, buffers, block_count, reduction, deadline);
  }
  ring_reduce_scatter(mesh, Ring::whole(mesh), buffers, Segments::blocks(block_count, mesh.size()),
                      reduction, deadline);
}

void reduce_scatter_list(Mesh& mesh, const std::vector<const char*>& blocks, char* output,
                         size_t block_count, Reduction reduction, Deadline deadline) {
  if (block_count == 0) return;
  if (mesh.size() > 1 && reduce_scatter_path(mesh, block_count, reduction) == Path::SingleCopy) {
    return single_copy::reduce_scatter_list(mesh, blocks, output, block_count, reduction,
                                            deadline);
  }
  // Else the blocks joined in one buffer, which the other algorithms fill with partial sums.
  const size_t bytes = block_count * kernels::element_size(reduction.dtype);
  std::unique_ptr<char[]> joined(new char[bytes * mesh.size()]);
  for (int j = 0; j < mesh.size(); ++j) std::memcpy(joined.get() + bytes * j, blocks[j], bytes);
  reduce_scatter(mesh, {joined.get(), joined.get(), output}, block_count, reduction, deadline);
}

void allgather(Mesh& mesh, void* data, size_t block_bytes, Deadline deadline) {
  if (mesh.size() == 1 || block_bytes == 0) return;
  if (single_copy::applies(mesh, block_bytes * mesh.size())) {
    return single_copy::allgather(mesh, static_cast<char*>(data), block_bytes, deadline);
  }
  if (hierarchical::applies(mesh)) {
    return hierarchical::allgather(mesh, static_cast<char*>(data), block_bytes, deadline);
  }
  ring_allgather(mesh, Ring::whole(mesh), static_cast<char*>(data),
                 Segments::blocks(block_bytes, mesh.size()), 1, deadline);
}

void allgather_into(Mesh& mesh, const void* input, const std::vector<void*>& outputs,
                    size_t bytes, Deadline deadline) {
  if (single_copy::applies(mesh, bytes)) {
    return single_copy::allgather_into(mesh, input, outputs, bytes, deadline);
  }
  // Through one buffer of every rank's block, which the allgather algorithms move.
  const int n = mesh.size();
  std::unique_ptr<char[]> blocks(new char[bytes * n]);
  std::memcpy(blocks.get() + bytes * mesh.rank(), input, bytes);
  allgather(mesh, blocks.get(), bytes, deadline);
  for (int r = 0; r < n; ++r) std::memcpy(outputs[r], blocks.get() + bytes * r, bytes);
}

void broadcast(Mesh& mesh, void* data, size_t bytes, int root, Deadline deadline) {
  if (mesh.size() == 1 || bytes == 0) return;
  // Between two ranks the ring is never slower: its two copies run at once on both cores, in
  // cache, where a single copy is one copy on the receiver's core alone (the root may not write
  // into the receiver, single_copy.hpp), at best at memcpy's rate (docs/PERFORMANCE.md, "Single
  // copies that only read").
  if (mesh.size() > 2 && single_copy::applies(mesh, bytes)) {
    return single_copy::broadcast(mesh, static_cast<char*>(data), bytes, root, deadline);
  }
  if (mesh.size() > 2 && bytes >= Tuning::get().chain_broadcast_min_bytes) {
    if (hierarchical::applies(mesh)) {
      return hierarchical::broadcast(mesh, static_cast<char*>(data), bytes, root, deadline);
    }
    // A pipelined chain root, root+1, ..., so that every rank copies the data once in and once
    // out instead of the root copying it once per rank.
    return chain_broadcast(mesh, Ring::whole(mesh).from(root), static_cast<char*>(data), bytes,
                           deadline);
  }
  // Every rank makes this exchange alike: it carries the agreement's records.
  if (mesh.rank() != root) {
    return mesh.exchange({}, {{root, data, bytes}}, deadline, transport::Records::Carried);
  }
  std::vector<transport::SendOp> sends;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer != root) sends.push_back({peer, data, bytes});
  }
  mesh.exchange(sends, {}, deadline, transport::Records::Carried);
}

void gather(Mesh& mesh, const void* data, const std::vector<void*>& blocks, size_t bytes,
            int root, Deadline deadline) {
  if (mesh.size() == 1 || bytes == 0) return;
  if (single_copy::applies(mesh, bytes)) {
    return single_copy::gather(mesh, data, blocks, bytes, root, deadline);
  }
  if (mesh.rank() != root) return mesh.exchange({{root, data, bytes}}, {}, deadline);
  std::vector<transport::RecvOp> recvs;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer != root) recvs.push_back({peer, blocks[peer], bytes});
  }
  mesh.exchange({}, recvs, deadline);
}

void scatter(Mesh& mesh, const std::vector<const void*>& blocks, void* data, size_t bytes,
             int root, Deadline deadline) {
  if (bytes == 0) return;
  if (single_copy::applies(mesh, bytes)) {
    return single_copy::scatter(mesh, blocks, data, bytes, root, deadline);
  }
  if (mesh.rank() != root) return mesh.exchange({}, {{root, data, bytes}}, deadline);
  std::memcpy(data, blocks[root], bytes);
  std::vector<transport::SendOp> sends;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer != root) sends.push_back({peer, blocks[peer], bytes});
  }
  mesh.exchange(sends, {}, deadline);
}

void alltoall(Mesh& mesh, const std::vector<transport::SendOp>& sends,
              const std::vector<transport::RecvOp>& receives, Deadline deadline) {
  const int r = mesh.rank();
  if (sends[r].bytes != receives[r].bytes) {
    throw std::invalid_argument("alltoall: this rank sends itself " +
                                std::to_string(sends[r].bytes) + " bytes but expects " +
                                std::to_string(receives[r].bytes));
  }
  if (mesh.peer_memory()) return single_copy::alltoall(mesh, sends, receives, deadline);
  std::memcpy(receives[r].data, sends[r].data, sends[r].bytes);
  std::vector<transport::SendOp> to_peers;
  std::vector<transport::RecvOp> from_peers;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer == r) continue;
    to_peers.push_back(sends[peer]);
    from_peers.push_back(receives[peer]);
  }
  mesh.exchange(to_peers, from_peers, deadline);
}

void barrier(Mesh& mesh, Deadline deadline) { barrier(mesh, Ring::whole(mesh), deadline); }

}  // namespace occl::algorithms
