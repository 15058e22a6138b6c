// Memory the ranks of a group allocate together (torch_occl.shared_empty): each rank creates a
// segment (a memfd, memfd.hpp) and maps every other rank's. A single-copy collective or a lent
// message whose buffers lie in such segments copies through these mappings (peer_buffer.hpp)
// with memcpy, at a core's speed, instead of with the kernel's cross-memory copy, which pins
// every page it touches (a 64 MiB broadcast between two ranks: 4.0–4.5 ms against 6.4–7.8 ms
// in a C test, docs/PERFORMANCE.md).
//
// Segments of the pool (segment_pool.hpp) need no such exchange: their creator keeps their fd
// open, and a peer maps one the first time a copy meets it (map_peer_segment).
//
// A segment is named by its creator's token (64 random bits drawn once per process, so that a
// pid reused by a later process never names an old segment) and a serial number the creator
// never reuses.
#pragma once

#include "memfd.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace occl::transport {

// This process's token.
uint64_t process_token();

// One rank's part of an allocation: its own segment, and its mappings of the peers' segments.
class SharedAllocation {
 public:
  // Creates and maps this rank's segment of `bytes`.
  explicit SharedAllocation(size_t bytes);
  ~SharedAllocation();  // forgets and unmaps every segment; a copy still running keeps its own
  SharedAllocation(const SharedAllocation&) = delete;
  SharedAllocation& operator=(const SharedAllocation&) = delete;

  void* data() const { return own_->base; }
  size_t bytes() const { return own_->bytes; }
  uint64_t serial() const { return serial_; }
  // For the peers to open through /proc until close_fd(); -1 after it.
  int fd() const { return fd_; }

  // Maps segment (`token`, `serial`), which process `pid` holds open as `fd`. Throws
  // TransportError when it has another size, cannot be opened, or is mapped already.
  void map_peer(pid_t pid, uint64_t token, uint64_t serial, int fd);
  // Once every peer has mapped this segment: the mappings hold it from then on.
  void close_fd();

 private:
  int fd_;
  std::shared_ptr<const Mapping> own_;
  uint64_t serial_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> peers_;  // (token, serial) map_peer() registered
};

// Registers `mapping` as a segment of this process, which a peer may map through `fd` (-1: the
// peers map it before any copy, as SharedAllocation's). Returns its serial.
uint64_t register_own_segment(std::shared_ptr<const Mapping> mapping, int fd);
void forget_own_segment(const Mapping& mapping);

// Where a buffer of this process lies: in its segment `serial` (0: in none) of
// `segment_bytes`, `offset` bytes from the segment's start; `fd` as registered.
struct SegmentPlace {
  uint64_t serial = 0;
  uint64_t offset = 0;
  uint64_t segment_bytes = 0;
  int fd = -1;
};
SegmentPlace find_own_segment(const void* data, size_t bytes);

// This process's mapping of segment (`token`, `serial`), or nullptr when it maps none; the
// pointer keeps the mapping while a copy uses it.
std::shared_ptr<const Mapping> find_peer_segment(uint64_t token, uint64_t serial);
// The same, mapping the segment first when this process maps none and its creator `pid` keeps
// it open as `fd` (>= 0), `bytes` long. The mapping stays until this process exits: pooled
// segments are never freed (segment_pool.hpp). Throws TransportError when it cannot be mapped.
std::shared_ptr<const Mapping> map_peer_segment(pid_t pid, uint64_t token, uint64_t serial,
                                                int fd, size_t bytes);

// Bytes copied through the mappings of peers' segments, by single copies and lent messages:
// the tests read it to tell that the fast path ran.
void count_bytes_through_segments(size_t bytes);
uint64_t bytes_through_segments();

}  // namespace occl::transport
