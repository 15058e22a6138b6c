#include "peer_buffer.hpp"

#include "socket.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace occl::transport {

Region region_of(const void* data, size_t bytes) {
  const SegmentPlace place = find_own_segment(data, bytes);
  return {reinterpret_cast<uint64_t>(data), bytes, process_token(), place.serial, place.offset,
          place.segment_bytes, place.fd};
}

PeerBuffer::PeerBuffer(const PeerMemory* memory, int peer, const Region& region)
    : memory_(memory), peer_(peer), region_(region) {
  if (region.serial == 0) return;
  if (region.fd < 0) {
    mapping_ = find_peer_segment(region.token, region.serial);
  } else {
    try {
      mapping_ = map_peer_segment(memory->pid(peer), region.token, region.serial,
                                  static_cast<int>(region.fd), region.segment_bytes);
    } catch (const TransportError&) {
      // The cross-memory copy reaches the same bytes, only slower.
    }
  }
  if (mapping_ && region.offset + region.bytes > mapping_->bytes) mapping_ = nullptr;
}

void PeerBuffer::read(uint64_t offset, void* local, size_t bytes) const {
  check_within(offset, bytes);
  if (!mapping_) return memory_->read(peer_, region_.address + offset, local, bytes);
  char* into = static_cast<char*>(local);
  for (size_t done = 0, piece; done < bytes; done += piece) {
    memory_->check_not_given_up();
    piece = std::min(PeerMemory::kPieceBytes, bytes - done);
    std::memcpy(into + done, mapped(offset + done), piece);
  }
  count_bytes_through_segments(bytes);
}

const char* PeerBuffer::mapped_for_reading(uint64_t offset, size_t bytes) const {
  check_within(offset, bytes);
  if (!mapping_) return nullptr;
  memory_->check_not_given_up();
  return mapped(offset);
}

// The ranks agreed on the sizes (Mesh::agree, or a message's header), unless told not to check:
// a memcpy past a mapping would corrupt this process, so a copy past the peer's buffer fails
// instead (and breaks the group: the peers are no longer in step).
void PeerBuffer::check_within(uint64_t offset, size_t bytes) const {
  if (offset + bytes <= region_.bytes) return;
  throw TransportError(TransportError::Kind::Protocol,
                       "a copy of " + std::to_string(bytes) + " bytes at offset " +
                           std::to_string(offset) + " runs past rank " + std::to_string(peer_) +
                           "'s buffer of " + std::to_string(region_.bytes) + " bytes");
}

const char* PeerBuffer::mapped(uint64_t offset) const {
  return static_cast<const char*>(mapping_->base) + region_.offset + offset;
}

}  // namespace occl::transport
