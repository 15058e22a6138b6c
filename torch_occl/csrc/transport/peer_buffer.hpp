// A buffer in another rank's memory, as the single-copy algorithms and lent messages read it:
// through this rank's read-only mapping of the peer's shared segment (shared_segments.hpp) with
// memcpy when the buffer lies in one (a pooled segment is mapped here on first use), otherwise
// with the kernel's cross-memory copy (peer_memory.hpp). Either way in pieces, each after a look
// at the group's given-up word.
// The path is chosen per buffer, so buffers of both kinds can meet in one collective.
#pragma once

#include "peer_memory.hpp"
#include "shared_segments.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace occl::transport {

// A buffer as its owner tells the peers of it (sent as bytes: both ends run the same build).
struct Region {
  uint64_t address;
  uint64_t bytes;
  // The shared segment it lies in: its creator's token and serial (0: in none), and the
  // buffer's offset from the segment's start.
  uint64_t token;
  uint64_t serial;
  uint64_t offset;
  // For a pooled segment, which a peer maps on first use: its size and its creator's fd (-1
  // for the others, which the peers mapped as they were allocated).
  uint64_t segment_bytes;
  int64_t fd;
};

// This process's buffer, as a Region.
Region region_of(const void* data, size_t bytes);

class PeerBuffer {
 public:
  PeerBuffer() = default;
  // `memory` reaches rank `peer` by cross-memory copy; it must outlive this buffer.
  PeerBuffer(const PeerMemory* memory, int peer, const Region& region);

  // Copy `bytes` at `offset` in the peer's buffer to `local`. Throws TransportError: Protocol
  // when the copy runs past the buffer, or as PeerMemory::read does.
  void read(uint64_t offset, void* local, size_t bytes) const;
  // The `bytes` at `offset` where this process maps them, to be read in place (at most
  // PeerMemory::kPieceBytes at a time); nullptr when the buffer lies in no segment this process
  // maps. Throws as read() does.
  const char* mapped_for_reading(uint64_t offset, size_t bytes) const;

 private:
  void check_within(uint64_t offset, size_t bytes) const;
  const char* mapped(uint64_t offset) const;

  const PeerMemory* memory_ = nullptr;
  int peer_ = -1;
  Region region_{};
  std::shared_ptr<const Mapping> mapping_;  // held while this rank copies
};

}  // namespace occl::transport
