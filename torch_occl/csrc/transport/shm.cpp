#include "shm.hpp"

#include "bootstrap.hpp"
#include "handshake.hpp"
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
// The longest text a rank sends while the links set up shared memory (a host's identity, an
// error message).
constexpr uint32_t kMaxText = 64 * 1024;

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
  return kLine +  // the given-up word
         kLanes * (kLine * local + pairs * (sizeof(ByteRing::Cursors) + round_up_pow2(ring_bytes)));
}

ShmLinks::ShmLinks(int rank, int size, std::vector<int> local_ranks, void* base, size_t bytes,
                   size_t ring_bytes)
    : rank_(rank), local_ranks_(std::move(local_ranks)), base_(base), bytes_(bytes) {
  const size_t local = local_ranks_.size();
  const size_t capacity = round_up_pow2(ring_bytes);
  local_index_.assign(static_cast<size_t>(size), -1);
  for (size_t i = 0; i < local; ++i) local_index_[local_ranks_[i]] = static_cast<int>(i);
  char* at = static_cast<char*>(base_);
  given_up_ = reinterpret_cast<GivenUpWord*>(at);  // zero, as the memfd was created
  at += kLine;
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

void ShmLinks::enable_peer_memory(std::vector<pid_t> pids) {
  peer_memory_ = std::make_unique<PeerMemory>(std::move(pids), given_up_);
}

void ShmLinks::give_up() {
  uint32_t nobody = 0;
  given_up_->compare_exchange_strong(nobody, static_cast<uint32_t>(rank_) + 1,
                                     std::memory_order_acq_rel);
}

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

// Every rank in `peers` (this one among them) tells every other one `mine` over the group's
// links; returns what each said, at its group rank. The texts are short: each send fits in the
// socket's buffer, so sending to all before receiving from any cannot deadlock.
std::vector<std::string> swap_texts(Bootstrap& bootstrap, const std::vector<Socket>& links,
                                    const std::vector<int>& peers, const std::string& mine) {
  const int rank = bootstrap.rank();
  const Deadline deadline = bootstrap.deadline();
  const uint32_t length = static_cast<uint32_t>(mine.size());
  for (int peer : peers) {
    if (peer == rank) continue;
    links[peer].send_all(&length, sizeof(length), deadline);
    links[peer].send_all(mine.data(), mine.size(), deadline);
  }
  std::vector<std::string> theirs(links.size());
  theirs[rank] = mine;
  for (int peer : peers) {
    if (peer == rank) continue;
    try {
      uint32_t bytes = 0;
      bootstrap.wait_readable(links[peer]);
      links[peer].recv_all(&bytes, sizeof(bytes), deadline);
      if (bytes > kMaxText) {
        throw TransportError(TransportError::Kind::Protocol,
                             "a message of " + std::to_string(bytes) + " bytes");
      }
      theirs[peer].resize(bytes);
      links[peer].recv_all(theirs[peer].data(), bytes, deadline);
    } catch (const TransportError& e) {
      throw TransportError(e.kind(), "rank " + std::to_string(peer) +
                                         " did not tell its shared-memory setup: " + e.what());
    }
  }
  return theirs;
}

// What a rank tells the others first: its pid, its probe's address and its host.
struct Introduction {
  uint32_t pid = 0;
  uint64_t probe_address = 0;
  std::string host;
};

std::string introduce() {
  return std::to_string(::getpid()) + " " + std::to_string(PeerMemory::probe_address()) + " " +
         host_identity();
}

Introduction parse_introduction(int peer, const std::string& text) {
  std::istringstream in(text);
  Introduction said;
  in >> said.pid >> said.probe_address;
  in.get();
  std::getline(in, said.host);
  if (!in && !in.eof()) {
    throw TransportError(TransportError::Kind::Protocol,
                         "rank " + std::to_string(peer) + " sent a malformed introduction");
  }
  return said;
}

// Every rank's pid is the one it stated when its links formed (Bootstrap::proven_pids): the pid
// that single copies and the region's fd lead to is never taken from the store, which anyone who
// reaches it may write.
void check_pids(const std::vector<Introduction>& introductions,
                const std::vector<uint32_t>& proven) {
  for (size_t r = 0; r < introductions.size(); ++r) {
    if (introductions[r].pid == proven[r]) continue;
    throw TransportError(
        TransportError::Kind::Protocol,
        "rank " + std::to_string(r) + "'s process is pid " +
            std::to_string(introductions[r].pid) + ", but its entry in the store announced pid " +
            std::to_string(proven[r]) + ": someone rewrote the store" + kImpostorHint);
  }
}

// Whether this rank reads every other local rank's probe: empty, or why not.
std::string probe_peers(int rank, const std::vector<int>& local_ranks,
                        const std::vector<Introduction>& introductions) {
  for (int r : local_ranks) {
    if (r == rank) continue;
    std::string why = PeerMemory::probe(introductions[r].pid, introductions[r].probe_address);
    if (!why.empty()) {
      return "rank " + std::to_string(rank) + " cannot read rank " + std::to_string(r) + ": " + why;
    }
  }
  return "";
}

// The first of the local ranks' answers that is not empty, naming its rank.
std::string first_failure(const std::vector<int>& local_ranks,
                          const std::vector<std::string>& answers) {
  for (int r : local_ranks) {
    if (!answers[r].empty()) return "rank " + std::to_string(r) + ": " + answers[r];
  }
  return "";
}

}  // namespace

SharedMemory connect_shared_memory(Bootstrap& bootstrap, const std::vector<Socket>& links,
                                   const ShmOptions& options) {
  const int rank = bootstrap.rank(), size = bootstrap.size();
  if (size == 1) return {nullptr, "a group of one"};
  if (options.mode == TransportMode::Tcp) return {nullptr, "OCCL_TRANSPORT=tcp"};
  std::vector<int> everyone(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) everyone[r] = r;
  const auto texts = swap_texts(bootstrap, links, everyone, introduce());
  std::vector<Introduction> introductions;
  for (int r = 0; r < size; ++r) introductions.push_back(parse_introduction(r, texts[r]));
  check_pids(introductions, bootstrap.proven_pids());

  const std::string& identity = introductions[rank].host;
  std::vector<int> local_ranks;
  std::vector<int> remote_ranks;
  std::vector<std::string> identities;  // of each host, in the order of their lowest ranks
  std::vector<int> hosts(size);
  for (int r = 0; r < size; ++r) {
    const std::string& theirs = introductions[r].host;
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

  // The lowest local rank creates the region and tells the others its fd (or why it has none);
  // they open it through /proc at the leader's proven pid, probe each other's memory, and say
  // whether both worked. All of them read every answer, so they agree on using shared memory or
  // not, and on single copies.
  const int leader = local_ranks.front();
  const size_t bytes = ShmLinks::region_bytes(static_cast<int>(local_ranks.size()), options.ring_bytes);
  Mapping mapping;
  int leader_fd = -1;
  std::string failure;
  if (rank == leader) {
    try {
      leader_fd = create_memfd(bytes);
      mapping = map_memfd(leader_fd, bytes);
    } catch (const TransportError& e) {
      failure = e.what();
    }
  }
  const auto fds = swap_texts(bootstrap, links, local_ranks,
                              rank == leader && failure.empty() ? std::to_string(leader_fd) : "");
  if (rank != leader) {
    try {
      if (fds[leader].empty()) {
        throw TransportError(TransportError::Kind::System, "the leader could not create it");
      }
      mapping = map_peer_memfd(static_cast<pid_t>(introductions[leader].pid),
                               std::stoi(fds[leader]), bytes, Access::ReadWrite);
    } catch (const TransportError& e) {
      failure = e.what();
    } catch (const std::exception&) {
      failure = "rank " + std::to_string(leader) + " sent a malformed fd";
    }
  }
  const std::string cannot_read = probe_peers(rank, local_ranks, introductions);
  const auto mapped = swap_texts(bootstrap, links, local_ranks, failure);
  const auto read = swap_texts(bootstrap, links, local_ranks, cannot_read);
  if (leader_fd >= 0) ::close(leader_fd);  // every mapping holds the region from here on
  const std::string mapping_failed = first_failure(local_ranks, mapped);
  if (!mapping_failed.empty()) {
    unmap(mapping);
    if (options.mode == TransportMode::Shm) {
      throw TransportError(TransportError::Kind::System,
                           "OCCL_TRANSPORT=shm, but shared memory failed on " + mapping_failed);
    }
    return {nullptr, "no shared memory: " + mapping_failed, hosts};  // auto: TCP carries all
  }
  std::string why_not_here;
  for (int r : local_ranks) {
    if (why_not_here.empty()) why_not_here = read[r];
  }
  const bool peer_memory = why_not_here.empty();
  std::string single_copies_off = why_not_here;
  if (!remote_ranks.empty()) {
    // The flat single-copy algorithms need every rank; the hierarchical ones use this host's.
    single_copies_off = elsewhere + (peer_memory ? "; on within this host (broadcasts across hosts)"
                                                 : "; off within this host too: " + why_not_here);
  }
  auto shm_links = std::make_unique<ShmLinks>(rank, size, std::move(local_ranks), mapping.base,
                                              mapping.bytes, options.ring_bytes);
  if (peer_memory) {
    std::vector<pid_t> pids;
    for (const Introduction& said : introductions) pids.push_back(static_cast<pid_t>(said.pid));
    shm_links->enable_peer_memory(std::move(pids));
  }
  return {std::move(shm_links), single_copies_off, hosts};
}

}  // namespace occl::transport
