#include "shared_segments.hpp"

#include "socket.hpp"

#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

namespace occl::transport {
namespace {

// Every segment this process maps, its own by serial and its peers' by (pid, serial). Shared
// pointers, so that an allocation freed while a collective copies through it unmaps only after
// the copy.
struct Registry {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<const Mapping>> own;
  std::map<std::pair<pid_t, uint64_t>, std::shared_ptr<const Mapping>> peers;
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

}  // namespace

SharedAllocation::SharedAllocation(size_t bytes) : fd_(create_memfd(bytes)) {
  try {
    own_ = hold(map_memfd(fd_, bytes));
  } catch (...) {
    ::close(fd_);
    throw;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  serial_ = ++r.last_serial;
  r.own[serial_] = own_;
}

SharedAllocation::~SharedAllocation() {
  close_fd();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.own.erase(serial_);
  for (const auto& key : peers_) r.peers.erase(key);
}

void SharedAllocation::map_peer(pid_t pid, uint64_t serial, int fd) {
  auto mapping = hold(map_peer_memfd(pid, fd, bytes()));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.peers[{pid, serial}] = std::move(mapping);
  peers_.emplace_back(pid, serial);
}

void SharedAllocation::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

SegmentPlace find_own_segment(const void* data, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [serial, mapping] : r.own) {
    const auto base = reinterpret_cast<uintptr_t>(mapping->base);
    if (begin >= base && begin - base + bytes <= mapping->bytes) return {serial, begin - base};
  }
  return {};
}

std::shared_ptr<const Mapping> find_peer_segment(pid_t pid, uint64_t serial) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.peers.find({pid, serial});
  return it == r.peers.end() ? nullptr : it->second;
}

void count_bytes_through_segments(size_t bytes) {
  registry().bytes_through.fetch_add(bytes, std::memory_order_relaxed);
}

uint64_t bytes_through_segments() {
  return registry().bytes_through.load(std::memory_order_relaxed);
}

}  // namespace occl::transport
