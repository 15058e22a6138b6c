// Memory the ranks of a group allocate together (torch_occl.shared_empty): each rank creates a
// segment (a memfd, memfd.hpp) and maps every other rank's. A single-copy collective whose
// buffers lie in such segments copies through these mappings with memcpy, at a core's full
// speed, instead of with the kernel's cross-memory copy, which pins every page it touches and
// ran at about half that speed for 64 MiB on the test VM (docs/PERFORMANCE.md).
//
// A segment is named by its creator's pid and a serial number the creator never reuses, so the
// mapping found for a (pid, serial) a peer names is always of the segment the peer means.
#pragma once

#include "memfd.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace occl::transport {

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

  // Maps the segment `serial` that process `pid` created, open as its `fd`. Throws
  // TransportError when the peer's segment has another size or cannot be opened.
  void map_peer(pid_t pid, uint64_t serial, int fd);
  // Once every peer has mapped this segment: the mappings hold it from then on.
  void close_fd();

 private:
  uint64_t serial_;
  int fd_;
  std::shared_ptr<const Mapping> own_;
  std::vector<std::pair<pid_t, uint64_t>> peers_;  // the segments map_peer() registered
};

// Where a buffer of this process lies: in its shared segment `serial` (0: in none), `offset`
// bytes from the start.
struct SegmentPlace {
  uint64_t serial = 0;
  uint64_t offset = 0;
};
SegmentPlace find_own_segment(const void* data, size_t bytes);

// This process's mapping of segment `serial` of process `pid`, or nullptr when it maps none;
// the pointer keeps the mapping while a copy uses it.
std::shared_ptr<const Mapping> find_peer_segment(pid_t pid, uint64_t serial);

// Bytes the single-copy algorithms moved through the mappings of peers' segments: the tests
// read it to tell that the fast path ran.
void count_bytes_through_segments(size_t bytes);
uint64_t bytes_through_segments();

}  // namespace occl::transport
