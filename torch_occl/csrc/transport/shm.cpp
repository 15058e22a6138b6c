#include "shm.hpp"

#include "bootstrap.hpp"
#include "memfd.hpp"
#include "peer_memory.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace occl::transport {
namespace {

// Producer and consumer cursors on separate cache-line pairs: neither side's writes evict the
// other's line (adjacent-line prefetch pulls lines in pairs).
constexpr size_t kLine = 128;
// Bytes a ring side copies before it publishes them: small enough that both sides of a large
// message copy at once, large enough that publishing costs nothing next to the copy.
constexpr size_t kSliceBytes = 64 * 1024;

size_t round_up_pow2(size_t n) {
  size_t p = 4096;
  while (p < n) p <<= 1;
  return p;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Moves a cursor forward and rings the doorbell of the side that waits for it.
void publish(std::atomic<uint64_t>& cursor, uint64_t value, Doorbell& doorbell) {
  cursor.store(value, std::memory_order_release);
  doorbell.ring();
}

}  // namespace

// ---- ByteRing ---------------------------------------------------------------------------------

struct ByteRing::Cursors {
  alignas(kLine) std::atomic<uint64_t> head;  // bytes ever written
  alignas(kLine) std::atomic<uint64_t> tail;  // bytes ever read
  alignas(kLine) std::atomic<uint32_t> poke_producer;  // the producer sleeps elsewhere
  std::atomic<uint32_t> poke_consumer;
};

ByteRing::ByteRing(void* header, char* data, size_t capacity, Doorbell producer,
                   Doorbell consumer)
    : cursors_(static_cast<Cursors*>(header)),
      data_(data),
      capacity_(capacity),
      producer_(producer),
      consumer_(consumer) {}

// The producer copies into the ring behind `head`, the consumer out of it behind `tail`; each
// side's room is bounded by the other's cursor, read again only when the room runs out.
template <ByteRing::Side side>
size_t ByteRing::move_some(const iovec* iov, int count, size_t most) {
  constexpr bool writing = side == Side::Producer;
  std::atomic<uint64_t>& own = writing ? cursors_->head : cursors_->tail;
  std::atomic<uint64_t>& other = writing ? cursors_->tail : cursors_->head;
  Doorbell& waiter = writing ? consumer_ : producer_;
  const uint64_t start = own.load(std::memory_order_relaxed);
  uint64_t cursor = start, published = start;
  uint64_t other_seen = other.load(std::memory_order_acquire);
  auto room = [&]() -> size_t {
    return writing ? capacity_ - (cursor - other_seen) : other_seen - cursor;
  };
  for (int i = 0; i < count && cursor - start < most; ++i) {
    char* bytes = static_cast<char*>(iov[i].iov_base);
    size_t left = std::min<size_t>(iov[i].iov_len, most - (cursor - start));
    while (left > 0) {
      if (room() == 0) other_seen = other.load(std::memory_order_acquire);
      const size_t at = static_cast<size_t>(cursor) & (capacity_ - 1);
      const size_t n =
          std::min({left, room(), capacity_ - at, kSliceBytes - (cursor - published)});
      if (n == 0) break;
      if constexpr (writing) {
        std::memcpy(data_ + at, bytes, n);
      } else {
        std::memcpy(bytes, data_ + at, n);
      }
      cursor += n;
      bytes += n;
      left -= n;
      if (cursor - published == kSliceBytes) publish(own, published = cursor, waiter);
    }
    if (left > 0) break;
  }
  if (cursor != published) publish(own, cursor, waiter);
  return static_cast<size_t>(cursor - start);
}

size_t ByteRing::write_some(const iovec* iov, int count, size_t most) {
  return move_some<Side::Producer>(iov, count, most);
}

size_t ByteRing::read_some(const iovec* iov, int count, size_t most) {
  return move_some<Side::Consumer>(iov, count, most);
}

bool ByteRing::readable() const {
  return cursors_->head.load(std::memory_order_seq_cst) !=
         cursors_->tail.load(std::memory_order_relaxed);
}

bool ByteRing::writable() const {
  return cursors_->head.load(std::memory_order_relaxed) -
             cursors_->tail.load(std::memory_order_seq_cst) < capacity_;
}

// A side that asks, then looks at the ring, and a side that moved bytes, then takes the request:
// with a full fence between each side's two steps, one of them sees the other's, so no poke is
// lost.
void ByteRing::ask_poke(Side side, bool asked) {
  auto& word = side == Side::Producer ? cursors_->poke_producer : cursors_->poke_consumer;
  word.store(asked ? 1 : 0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool ByteRing::take_poke(Side side) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto& word = side == Side::Producer ? cursors_->poke_producer : cursors_->poke_consumer;
  return word.load(std::memory_order_relaxed) != 0 && word.exchange(0) != 0;
}

// ---- Doorbell ---------------------------------------------------------------------------------

void Doorbell::ring() {
  // Orders what the caller published before the read of the count (see the class comment).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (words_->sleepers.load(std::memory_order_relaxed) == 0) return;
  words_->value.fetch_add(1, std::memory_order_seq_cst);
  futex(&words_->value, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::wait(uint32_t seen, int timeout_ms) {
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  // Returns at once if the value moved past `seen` since the caller read it: no lost wake-up.
  futex(&words_->value, FUTEX_WAIT, seen, &ts);
}

// ---- ShmLinks ---------------------------------------------------------------------------------

size_t ShmLinks::region_bytes(int local, size_t ring_bytes) {
  size_t pairs = static_cast<size_t>(local) * local;
  return kLanes * (kLine * local + pairs * (sizeof(ByteRing::Cursors) + round_up_pow2(ring_bytes)));
}

ShmLinks::ShmLinks(int rank, int size, std::vector<int> local_ranks, void* base, size_t bytes,
                   size_t ring_bytes)
    : rank_(rank), local_ranks_(std::move(local_ranks)), base_(base), bytes_(bytes) {
  const size_t local = local_ranks_.size();
  const size_t capacity = round_up_pow2(ring_bytes);
  local_index_.assign(static_cast<size_t>(size), -1);
  for (size_t i = 0; i < local; ++i) local_index_[local_ranks_[i]] = static_cast<int>(i);
  char* at = static_cast<char*>(base_);
  for (size_t i = 0; i < kLanes * local; ++i, at += kLine) doorbells_.emplace_back(at);
  for (size_t lane = 0; lane < kLanes; ++lane) {
    const Doorbell* lane_doorbells = &doorbells_[lane * local];
    for (size_t from = 0; from < local; ++from) {
      for (size_t to = 0; to < local; ++to) {
        char* data = at + sizeof(ByteRing::Cursors);
        rings_.emplace_back(at, data, capacity, lane_doorbells[from], lane_doorbells[to]);
        at = data + capacity;
      }
    }
  }
}

ShmLinks::~ShmLinks() { ::munmap(base_, bytes_); }

TransportMode transport_mode_from_env() {
  const char* value = std::getenv("OCCL_TRANSPORT");
  std::string mode = value ? value : "auto";
  if (mode == "auto" || mode.empty()) return TransportMode::Auto;
  if (mode == "tcp") return TransportMode::Tcp;
  if (mode == "shm") return TransportMode::Shm;
  throw TransportError(TransportError::Kind::System,
                       "OCCL_TRANSPORT is '" + mode + "', expected auto, tcp or shm");
}

namespace {

// Whether this host's ranks may copy from and into each other's memory (peer_memory.hpp): each
// tells the others its pid and probe address, reads every peer's probe, and says whether all
// worked; all read every answer, so they agree. Without it (a pair cannot), why not.
std::unique_ptr<PeerMemory> probe_peer_memory(Bootstrap& bootstrap,
                                              const std::vector<int>& local_ranks,
                                              std::string& why_not) {
  const int rank = bootstrap.rank();
  auto key = [](const char* what, int r) {
    return "shm/" + std::string(what) + "/" + std::to_string(r);
  };
  bootstrap.set(key("pid", rank),
           std::to_string(::getpid()) + " " + std::to_string(PeerMemory::probe_address()));
  std::vector<pid_t> pids(static_cast<size_t>(bootstrap.size()));
  std::string failure;
  for (int r : local_ranks) {
    std::istringstream in(bootstrap.wait(key("pid", r)));
    uint64_t address = 0;
    in >> pids[r] >> address;
    if (r != rank && failure.empty()) {
      std::string why = PeerMemory::probe(pids[r], address);
      if (!why.empty()) {
        failure = "rank " + std::to_string(rank) + " cannot read rank " + std::to_string(r) +
                  ": " + why;
      }
    }
  }
  bootstrap.set(key("peer-memory", rank), failure);
  for (size_t i = 0; i < local_ranks.size() && why_not.empty(); ++i) {
    why_not = bootstrap.wait(key("peer-memory", local_ranks[i]));
  }
  return why_not.empty() ? std::make_unique<PeerMemory>(std::move(pids)) : nullptr;
}

}  // namespace

SharedMemory connect_shared_memory(Bootstrap& bootstrap, const ShmOptions& options) {
  const int rank = bootstrap.rank(), size = bootstrap.size();
  if (size == 1) return {nullptr, "a group of one"};
  if (options.mode == TransportMode::Tcp) return {nullptr, "OCCL_TRANSPORT=tcp"};
  const std::string identity = host_identity();
  bootstrap.set("shm/host/" + std::to_string(rank), identity);
  std::vector<int> local_ranks;
  std::vector<int> remote_ranks;
  std::vector<std::string> identities;  // of each host, in the order of their lowest ranks
  std::vector<int> hosts(size);
  for (int r = 0; r < size; ++r) {
    const std::string theirs = r == rank ? identity : bootstrap.wait("shm/host/" + std::to_string(r));
    hosts[r] = static_cast<int>(std::find(identities.begin(), identities.end(), theirs) -
                                identities.begin());
    if (hosts[r] == static_cast<int>(identities.size())) identities.push_back(theirs);
    (theirs == identity ? local_ranks : remote_ranks).push_back(r);
  }
  std::string remote;
  for (int r : remote_ranks) remote += (remote.empty() ? "" : ", ") + std::to_string(r);
  const std::string elsewhere =
      "rank(s) " + remote + " run on another host (or as another user, or in other namespaces)";
  if (options.mode == TransportMode::Shm && !remote_ranks.empty()) {
    throw TransportError(TransportError::Kind::System, "OCCL_TRANSPORT=shm, but " + elsewhere);
  }
  if (local_ranks.size() < 2) return {nullptr, elsewhere, hosts};

  // The lowest local rank creates the region; the others map it and say whether that worked. All
  // of them read every answer, so they agree on using shared memory or not.
  const int leader = local_ranks.front();
  const size_t bytes = ShmLinks::region_bytes(static_cast<int>(local_ranks.size()), options.ring_bytes);
  const std::string region_key = "shm/region/" + std::to_string(leader);
  Mapping mapping;
  int leader_fd = -1;
  std::string failure;
  try {
    if (rank == leader) {
      leader_fd = create_memfd(bytes);
      mapping = map_memfd(leader_fd, bytes);
      bootstrap.set(region_key, std::to_string(::getpid()) + " " + std::to_string(leader_fd));
    } else {
      std::istringstream where(bootstrap.wait(region_key));
      long pid = 0;
      int fd = -1;
      where >> pid >> fd;
      mapping = map_peer_memfd(static_cast<pid_t>(pid), fd, bytes);
    }
  } catch (const TransportError& e) {
    failure = e.what();
  }
  bootstrap.set("shm/mapped/" + std::to_string(rank), failure);
  std::string first_failure;
  for (int r : local_ranks) {
    std::string answer = bootstrap.wait("shm/mapped/" + std::to_string(r));
    if (!answer.empty() && first_failure.empty()) {
      first_failure = "rank " + std::to_string(r) + ": " + answer;
    }
  }
  if (leader_fd >= 0) ::close(leader_fd);  // every mapping holds the region from here on
  if (!first_failure.empty()) {
    unmap(mapping);
    if (options.mode == TransportMode::Shm) {
      throw TransportError(TransportError::Kind::System,
                           "OCCL_TRANSPORT=shm, but shared memory failed on " + first_failure);
    }
    return {nullptr, "no shared memory: " + first_failure, hosts};  // auto: TCP carries all
  }
  std::string why_not_here;
  auto memory = probe_peer_memory(bootstrap, local_ranks, why_not_here);
  std::string single_copies_off = why_not_here;
  if (!remote_ranks.empty()) {
    // The flat single-copy algorithms need every rank; the hierarchical ones use this host's.
    single_copies_off = elsewhere + (memory ? "; on within this host (broadcasts across hosts)"
                                            : "; off within this host too: " + why_not_here);
  }
  auto links = std::make_unique<ShmLinks>(rank, size, std::move(local_ranks), mapping.base,
                                          mapping.bytes, options.ring_bytes);
  links->set_peer_memory(std::move(memory));
  return {std::move(links), single_copies_off, hosts};
}

}  // namespace occl::transport
