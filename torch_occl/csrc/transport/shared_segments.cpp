#include "shared_segments.hpp"

#include "socket.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <string>

namespace occl::transport {
namespace {

struct OwnSegment {
  uint64_t serial;
  std::shared_ptr<const Mapping> mapping;
  int fd;  // open for the peers to map, or -1
};

// Every segment this process maps: its own by base address, its peers' by (token, serial).
// Shared pointers, so that an allocation freed while a collective copies through a peer's
// segment unmaps it only after the copy.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, OwnSegment> own;
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const Mapping>> peers;
  uint64_t last_serial = 0;
  std::atomic<uint64_t> bytes_through{0};
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: deleters may run at exit
  return *instance;
}

std::shared_ptr<const Mapping> hold(Mapping mapping) {
  return std::shared_ptr<const Mapping>(new Mapping(mapping), [](const Mapping* m) {
    unmap(*m);
    delete m;
  });
}

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device entropy;
    uint64_t drawn = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
    return drawn ^ static_cast<uint64_t>(
                       std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return token;
}

uint64_t register_own_segment(std::shared_ptr<const Mapping> mapping, int fd) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const uint64_t serial = ++r.last_serial;
  const uintptr_t base = address(mapping->base);
  r.own[base] = {serial, std::move(mapping), fd};
  return serial;
}

void forget_own_segment(const Mapping& mapping) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.own.erase(address(mapping.base));
}

SharedAllocation::SharedAllocation(size_t bytes) : fd_(create_memfd(bytes)) {
  try {
    own_ = hold(map_memfd(fd_, bytes));
    serial_ = register_own_segment(own_, /*fd=*/-1);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SharedAllocation::~SharedAllocation() {
  close_fd();
  forget_own_segment(*own_);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& key : peers_) r.peers.erase(key);
}

void SharedAllocation::map_peer(pid_t pid, uint64_t token, uint64_t serial, int fd) {
  auto mapping = hold(map_peer_memfd(pid, fd, bytes(), Access::ReadOnly));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.peers.emplace(std::make_pair(token, serial), std::move(mapping)).second) {
    throw TransportError(TransportError::Kind::Protocol,
                         "segment " + std::to_string(serial) + " of pid " + std::to_string(pid) +
                             " is mapped already");
  }
  peers_.emplace_back(token, serial);
}

void SharedAllocation::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

SegmentPlace find_own_segment(const void* data, size_t bytes) {
  const uintptr_t begin = address(data);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto after = r.own.upper_bound(begin);  // the first segment that starts after `data`
  if (after == r.own.begin()) return {};
  const auto& [base, segment] = *std::prev(after);
  if (begin - base + bytes > segment.mapping->bytes) return {};
  return {segment.serial, begin - base, segment.mapping->bytes, segment.fd};
}

std::shared_ptr<const Mapping> find_peer_segment(uint64_t token, uint64_t serial) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.peers.find({token, serial});
  return it == r.peers.end() ? nullptr : it->second;
}

std::shared_ptr<const Mapping> map_peer_segment(pid_t pid, uint64_t token, uint64_t serial,
                                                int fd, size_t bytes) {
  if (auto mapped = find_peer_segment(token, serial)) return mapped;
  // Outside the lock: it may take long.
  auto mapping = hold(map_peer_memfd(pid, fd, bytes, Access::ReadOnly));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // Another thread may have mapped it meanwhile: keep the first mapping, unmap this one.
  return r.peers.emplace(std::make_pair(token, serial), std::move(mapping)).first->second;
}

void count_bytes_through_segments(size_t bytes) {
  registry().bytes_through.fetch_add(bytes, std::memory_order_relaxed);
}

uint64_t bytes_through_segments() {
  return registry().bytes_through.load(std::memory_order_relaxed);
}

}  // namespace occl::transport
