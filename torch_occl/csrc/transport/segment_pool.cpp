#include "segment_pool.hpp"

#include "memfd.hpp"
#include "shared_segments.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace occl::transport {
namespace {

// A free segment serves a request when what it leaves unused is at most 1/kWasteDivisor of the
// request: FSDP2 asks for the same sizes on every step, so exact fits are the rule, and a larger
// segment saves a new one only when little of it goes to waste.
constexpr size_t kWasteDivisor = 4;

struct Segment {
  int fd;  // never closed: peers open the segment through it whenever they first meet it
  Mapping mapping;
};

struct Pool {
  std::mutex mutex;
  std::multimap<size_t, Segment> free;  // by size
  size_t made = 0;
};

Pool& pool() {
  static Pool* instance = new Pool();  // never destroyed: buffers may be freed at exit
  return *instance;
}

size_t page_multiple(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

Segment take_free_or_make(size_t bytes) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto fit = p.free.lower_bound(bytes);
    if (fit != p.free.end() && fit->first - bytes <= bytes / kWasteDivisor) {
      Segment segment = fit->second;
      p.free.erase(fit);
      return segment;
    }
  }
  const int fd = create_memfd(bytes);
  try {
    Segment segment{fd, map_memfd(fd, bytes)};
    // Registered once for good: the serial names the segment to the peers' mappings.
    register_own_segment(std::make_shared<const Mapping>(segment.mapping), fd);
    std::lock_guard<std::mutex> lock(p.mutex);
    ++p.made;
    return segment;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace

std::shared_ptr<void> take_pooled_buffer(size_t bytes) {
  const Segment segment = take_free_or_make(page_multiple(bytes));
  return std::shared_ptr<void>(segment.mapping.base, [segment](void*) {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.free.emplace(segment.mapping.bytes, segment);
  });
}

size_t pooled_segments() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.made;
}

}  // namespace occl::transport
