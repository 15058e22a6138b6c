#include "single_copy.hpp"

#include "ring.hpp"

#include "../tuning.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace occl::algorithms::single_copy {

using transport::PeerBuffer;
using transport::PeerMemory;

namespace {

using transport::Region;
using transport::region_of;

// Tells every other member j about for_peer[j] (indexed by group rank); returns what each told
// us, at its group rank.
std::vector<Region> swap_regions(Mesh& mesh, const Ring& members,
                                 const std::vector<Region>& for_peer, Deadline deadline) {
  std::vector<Region> from_peer(for_peer.size());
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> recvs;
  for (int peer : members.ranks) {
    if (peer == mesh.rank()) continue;
    sends.push_back({peer, &for_peer[peer], sizeof(Region)});
    recvs.push_back({peer, &from_peer[peer], sizeof(Region)});
  }
  mesh.exchange(sends, recvs, deadline);
  return from_peer;
}

std::vector<PeerBuffer> share(Mesh& mesh, const void* data, size_t bytes, Deadline deadline) {
  return single_copy::share(mesh, *mesh.peer_memory(), Ring::whole(mesh), data, bytes, deadline);
}

// Members in the order this rank visits them: starting after itself, so that they do not all
// read from the first member first.
std::vector<int> peers_from(const Ring& members) {
  std::vector<int> peers;
  for (int i = 1; i < members.size(); ++i) {
    peers.push_back(members.ranks[(members.position + i) % members.size()]);
  }
  return peers;
}

std::vector<int> peers_from(const Mesh& mesh) { return peers_from(Ring::whole(mesh)); }

// Reduces this rank's segment (`count` elements from element `first`) of every rank's `inputs`
// and of its own `input` into `output`, in pieces of Tuning::pipeline_chunk_bytes, folded in rank
// order so that the bits do not depend on r. A peer's piece is read where this rank maps it
// (shared_empty tensors), or else first copied into a small staging buffer that stays in cache.
// Only this rank reads segment r of a peer's buffer, so no peer has to wait for another.
void reduce_own_segment(Mesh& mesh, const std::vector<PeerBuffer>& inputs, const char* input,
                        char* output, size_t first, size_t count, Reduction reduction) {
  const int n = mesh.size();
  const int r = mesh.rank();
  const size_t element = kernels::element_size(reduction.dtype);
  const size_t chunk = std::max<size_t>(
      1, std::min(Tuning::get().pipeline_chunk_bytes, PeerMemory::kPieceBytes) / element);
  std::unique_ptr<char[]> staging(new char[chunk * element * n]);  // a slot per rank
  std::vector<const void*> sources(n);
  const std::vector<int> peers = peers_from(mesh);
  for (size_t done = 0; done < count; done += chunk) {
    const size_t bytes = std::min(chunk, count - done) * element;
    const size_t offset = (first + done) * element;
    for (int peer : peers) {
      if (const char* mapped = inputs[peer].mapped_for_reading(offset, bytes)) {
        sources[peer] = mapped;
        transport::count_bytes_through_segments(bytes);
        continue;
      }
      char* slot = staging.get() + chunk * element * peer;
      inputs[peer].read(offset, slot, bytes);
      sources[peer] = slot;
    }
    sources[r] = input + offset;
    kernels::reduce(output + done * element, sources.data(), n, bytes / element, reduction.dtype,
                    reduction.op);
  }
}

// Copies segment j of rank j's buffer into segment j of `data`, for every peer j.
void gather_segments(Mesh& mesh, const std::vector<PeerBuffer>& buffers, char* data,
                     const Segments& segments, size_t element) {
  for (int peer : peers_from(mesh)) {
    const size_t offset = segments.begin(peer) * element;
    buffers[peer].read(offset, data + offset, segments.count(peer) * element);
  }
}

}  // namespace

std::vector<PeerBuffer> share(Mesh& mesh, const PeerMemory& memory, const Ring& members,
                              const void* data, size_t bytes, Deadline deadline) {
  const auto regions = swap_regions(
      mesh, members, std::vector<Region>(mesh.size(), region_of(data, bytes)), deadline);
  std::vector<PeerBuffer> buffers(mesh.size());
  for (int peer : members.ranks) {
    if (peer != mesh.rank()) buffers[peer] = PeerBuffer(&memory, peer, regions[peer]);
  }
  return buffers;
}

bool applies(const Mesh& mesh, size_t bytes) {
  return mesh.peer_memory() != nullptr && bytes >= Tuning::get().single_copy_min_bytes;
}

// Every rank only ever reads its peers' buffers (peer_memory.hpp says why): each reduces its
// segment where it lies in its own buffer, and then copies the others' reduced segments out of
// theirs.
void allreduce(Mesh& mesh, char* data, size_t count, Reduction reduction, Deadline deadline) {
  const size_t element = kernels::element_size(reduction.dtype);
  const Segments segments = Segments::even(count, mesh.size());
  const int r = mesh.rank();
  const auto buffers = share(mesh, data, count * element, deadline);
  reduce_own_segment(mesh, buffers, data, data + segments.begin(r) * element, segments.begin(r),
                     segments.count(r), reduction);
  barrier(mesh, deadline);  // every segment is reduced
  gather_segments(mesh, buffers, data, segments, element);
  barrier(mesh, deadline);
}

void reduce(Mesh& mesh, char* data, size_t count, Reduction reduction, int root,
            Deadline deadline) {
  // allreduce's, with the others' segments reduced into a buffer of their own (their inputs stay
  // as they were), which the root then copies out of.
  const size_t element = kernels::element_size(reduction.dtype);
  const Segments segments = Segments::even(count, mesh.size());
  const int r = mesh.rank();
  const auto buffers = share(mesh, data, count * element, deadline);
  // Where a rank other than the root keeps its reduced segment until the root copied it: the
  // mesh's scratch, as a fresh allocation of megabytes would fault in page by page every call.
  char* reduced = r == root ? data + segments.begin(r) * element
                            : mesh.scratch(segments.count(r) * element);
  reduce_own_segment(mesh, buffers, data, reduced, segments.begin(r), segments.count(r),
                     reduction);
  if (r == root) {
    std::vector<Region> theirs(mesh.size());
    std::vector<transport::RecvOp> told;
    for (int peer : peers_from(mesh)) told.push_back({peer, &theirs[peer], sizeof(Region)});
    mesh.exchange({}, told, deadline);
    for (int peer : peers_from(mesh)) {
      PeerBuffer(mesh.peer_memory(), peer, theirs[peer])
          .read(0, data + segments.begin(peer) * element, segments.count(peer) * element);
    }
  } else {
    const Region mine = region_of(reduced, segments.count(r) * element);
    mesh.exchange({{root, &mine, sizeof(Region)}}, {}, deadline);
  }
  barrier(mesh, deadline);  // the root copied every reduced segment
}

void reduce_scatter(Mesh& mesh, const ReduceBuffers& buffers, size_t block_count,
                    Reduction reduction, Deadline deadline) {
  const size_t element = kernels::element_size(reduction.dtype);
  const auto inputs = share(mesh, buffers.input, block_count * element * mesh.size(), deadline);
  reduce_own_segment(mesh, inputs, buffers.input, buffers.output, block_count * mesh.rank(),
                     block_count, reduction);
  barrier(mesh, deadline);
}

void reduce_scatter_list(Mesh& mesh, const std::vector<const char*>& blocks, char* output,
                         size_t block_count, Reduction reduction, Deadline deadline) {
  // reduce_scatter's, with each rank's blocks where they lie: a peer shows this rank only the
  // block it reduces.
  const size_t bytes = block_count * kernels::element_size(reduction.dtype);
  std::vector<Region> for_peer(mesh.size());
  for (int peer = 0; peer < mesh.size(); ++peer) for_peer[peer] = region_of(blocks[peer], bytes);
  const auto regions = swap_regions(mesh, Ring::whole(mesh), for_peer, deadline);
  std::vector<PeerBuffer> inputs(mesh.size());
  for (int peer : peers_from(mesh)) {
    inputs[peer] = PeerBuffer(mesh.peer_memory(), peer, regions[peer]);
  }
  reduce_own_segment(mesh, inputs, blocks[mesh.rank()], output, 0, block_count, reduction);
  barrier(mesh, deadline);
}

void allgather(Mesh& mesh, char* data, size_t block_bytes, Deadline deadline) {
  const auto buffers = share(mesh, data, block_bytes * mesh.size(), deadline);
  gather_segments(mesh, buffers, data, Segments::blocks(block_bytes, mesh.size()), 1);
  barrier(mesh, deadline);
}

void broadcast(Mesh& mesh, char* data, size_t bytes, int root, Deadline deadline) {
  const auto buffers = share(mesh, data, bytes, deadline);
  if (mesh.rank() != root) buffers[root].read(0, data, bytes);
  barrier(mesh, deadline);
}

void alltoall(Mesh& mesh, const std::vector<transport::SendOp>& sends,
              const std::vector<transport::RecvOp>& receives, Deadline deadline) {
  // Decided pair by pair from the size of the slice, which both ends of a pair know: a large
  // slice stays where it is and its receiver copies it out, a small one travels through the mesh
  // in the same exchange that tells the receivers of large ones where to find them.
  const size_t single_copy_min = Tuning::get().single_copy_min_bytes;
  auto large = [&](size_t bytes) { return bytes >= single_copy_min; };
  const int r = mesh.rank();
  if (sends[r].bytes > 0) std::memcpy(receives[r].data, sends[r].data, sends[r].bytes);
  std::vector<Region> outgoing(mesh.size());
  std::vector<Region> incoming(mesh.size());
  std::vector<transport::SendOp> to_peers;
  std::vector<transport::RecvOp> from_peers;
  for (int peer : peers_from(mesh)) {
    const transport::SendOp& out = sends[peer];
    const transport::RecvOp& in = receives[peer];
    if (large(out.bytes)) {
      outgoing[peer] = region_of(out.data, out.bytes);
      to_peers.push_back({peer, &outgoing[peer], sizeof(Region)});
    } else {
      to_peers.push_back(out);
    }
    if (large(in.bytes)) {
      from_peers.push_back({peer, &incoming[peer], sizeof(Region)});
    } else {
      from_peers.push_back(in);
    }
  }
  mesh.exchange(to_peers, from_peers, deadline);

  // Copy the large slices out, then tell their senders that their buffers are free again.
  std::string mismatch;
  std::vector<transport::SendOp> copied;
  std::vector<transport::RecvOp> released;
  for (int peer : peers_from(mesh)) {
    if (large(sends[peer].bytes)) released.push_back({peer, nullptr, 0});
    if (!large(receives[peer].bytes)) continue;
    copied.push_back({peer, nullptr, 0});  // also after a mismatch: the sender waits for it
    if (incoming[peer].bytes != receives[peer].bytes) {
      if (mismatch.empty()) {
        mismatch = "rank " + std::to_string(peer) + " sends " +
                   std::to_string(incoming[peer].bytes) + " bytes to rank " + std::to_string(r) +
                   ", which expects " + std::to_string(receives[peer].bytes) +
                   " bytes (do the ranks agree on the split sizes?)";
      }
      continue;
    }
    PeerBuffer(mesh.peer_memory(), peer, incoming[peer])
        .read(0, receives[peer].data, receives[peer].bytes);
  }
  if (!copied.empty() || !released.empty()) mesh.exchange(copied, released, deadline);
  // Every rank sent and received the same messages: the links are in step, the group usable.
  if (!mismatch.empty()) throw kit::MismatchError(mismatch);
}

void allgather_into(Mesh& mesh, const void* input, const std::vector<void*>& outputs,
                    size_t bytes, Deadline deadline) {
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> receives;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    sends.push_back({peer, input, bytes});
    receives.push_back({peer, outputs[peer], bytes});
  }
  alltoall(mesh, sends, receives, deadline);
}

void gather(Mesh& mesh, const void* data, const std::vector<void*>& blocks, size_t bytes,
            int root, Deadline deadline) {
  const bool is_root = mesh.rank() == root;
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> receives;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    const bool to_root = peer == root && !is_root;
    const bool from_peer = is_root && peer != root;
    sends.push_back({peer, data, to_root ? bytes : 0});
    receives.push_back({peer, blocks.empty() ? nullptr : blocks[peer], from_peer ? bytes : 0});
  }
  alltoall(mesh, sends, receives, deadline);
}

void scatter(Mesh& mesh, const std::vector<const void*>& blocks, void* data, size_t bytes,
             int root, Deadline deadline) {
  const bool is_root = mesh.rank() == root;
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> receives;
  for (int peer = 0; peer < mesh.size(); ++peer) {
    sends.push_back({peer, is_root ? blocks[peer] : nullptr, is_root ? bytes : 0});
    const bool from_root = peer == root;
    receives.push_back({peer, from_root ? data : nullptr, from_root ? bytes : 0});
  }
  alltoall(mesh, sends, receives, deadline);
}

}  // namespace occl::algorithms::single_copy
