// Shared-memory links between the ranks of a group that run on the same host.
//
// The ranks of one host map one region (a memfd, so nothing is ever named in /dev/shm and the
// kernel frees it when the last rank unmaps it or dies). The region holds, for every ordered pair
// of local ranks and each lane (collectives, point-to-point), a single-producer single-consumer
// byte ring, and for every local rank and lane a doorbell:
// a futex word on which a rank with nothing to do sleeps in the kernel instead of spinning on a
// core another rank needs; writers that add bytes or free space bump it only when someone sleeps.
//
// A ring carries the same framed byte stream as a TCP socket, so the Mesh treats both alike.
#pragma once

#include "peer_memory.hpp"
#include "socket.hpp"

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace occl::transport {

class Bootstrap;

// A futex word in shared memory, with a count of the threads asleep on it. Waking costs the
// waker a store to a line its peer reads, so ring() does it only when someone sleeps; a sleeper
// first counts itself, then looks once more at what it waits for (sleep_unless), and a ringer
// first publishes, then reads the count: with a full fence on each side, either the sleeper sees
// what was published or the ringer sees the sleeper.
class Doorbell {
 public:
  explicit Doorbell(void* word) : words_(static_cast<Words*>(word)) {}
  // Call after publishing (bytes, space, an abort flag).
  void ring();
  // Sleeps at most `timeout_ms` unless `ready()` (called once, after this thread counts as a
  // sleeper) holds; returns whether it slept through the timeout without a ring.
  template <typename Ready>
  bool sleep_unless(Ready ready, int timeout_ms) {
    words_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = words_->value.load(std::memory_order_acquire);
    bool timed_out = false;
    if (!ready()) {
      wait(seen, timeout_ms);
      timed_out = words_->value.load(std::memory_order_acquire) == seen;
    }
    words_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return timed_out;
  }

 private:
  // Sleeps while the value is still `seen`, at most `timeout_ms`.
  void wait(uint32_t seen, int timeout_ms);

  struct Words {
    std::atomic<uint32_t> value;
    std::atomic<uint32_t> sleepers;
  };
  Words* words_;
};

// One direction of a link: the producer owns `head`, the consumer owns `tail`; both only grow.
// Bytes move in slices, each published (and the other side's doorbell rung) as soon as it is
// copied, so that producer and consumer copy at the same time instead of taking turns.
class ByteRing {
 public:
  struct Cursors;  // at the start of each ring's part of the region
  ByteRing(void* header, char* data, size_t capacity, Doorbell producer, Doorbell consumer);

  // Copy as many bytes of the `count` iovecs, at most `most`, as fit (or are there), and return
  // how many. All of them are published at once (and the other side's doorbell rung once), so a
  // frame's header and payload cost one hand-off.
  size_t write_some(const iovec* iov, int count, size_t most);
  size_t read_some(const iovec* iov, int count, size_t most);
  bool readable() const;
  bool writable() const;

  // For a side that sleeps elsewhere than on its doorbell (the p2p engine's thread sleeps in
  // poll() on sockets): before it sleeps it asks to be poked and looks at the ring once more;
  // the other side, once it moved bytes, takes the request and pokes it (over the socket).
  enum class Side { Producer, Consumer };
  void ask_poke(Side side, bool asked);
  bool take_poke(Side side);  // whether `side` asked; clears the request

 private:
  template <Side side>
  size_t move_some(const iovec* iov, int count, size_t most);

  Cursors* cursors_;
  char* data_;
  size_t capacity_;  // a power of two
  Doorbell producer_;
  Doorbell consumer_;
};

// Tells the core a thread is spinning on shared memory (it then spins cheaper, and a sibling
// hyperthread runs faster).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

enum class TransportMode { Auto, Tcp, Shm };

// OCCL_TRANSPORT: "auto" (default: shared memory between ranks on the same host, TCP between
// hosts), "tcp", or "shm" (every rank of the group must be on this host).
TransportMode transport_mode_from_env();

struct ShmOptions {
  TransportMode mode;
  size_t ring_bytes;  // per direction per pair of ranks; rounded up to a power of two
};

// What a ring carries: the mesh's collective frames, or the p2p engine's messages, which arrive
// in any order and so never share a ring with a collective's.
enum class Lane { Collective = 0, PointToPoint = 1 };
constexpr int kLanes = 2;

// The shared-memory links of this rank (none when it shares its host with no other rank).
class ShmLinks {
 public:
  ShmLinks(int rank, int size, std::vector<int> local_ranks, void* base, size_t bytes,
           size_t ring_bytes);
  ~ShmLinks();
  ShmLinks(const ShmLinks&) = delete;
  ShmLinks& operator=(const ShmLinks&) = delete;

  bool reaches(int peer) const { return local_index_.at(peer) >= 0; }
  ByteRing& to(int peer, Lane lane = Lane::Collective) {
    return rings_[index(lane, local_index_[rank_], local_index_[peer])];
  }
  ByteRing& from(int peer, Lane lane = Lane::Collective) {
    return rings_[index(lane, local_index_[peer], local_index_[rank_])];
  }
  // Rung by the collective rings' writers and readers; the p2p lane's are rung but never waited
  // on (its engine sleeps in poll(), and asks its peers for pokes instead).
  Doorbell& own_doorbell() { return doorbells_[local_index_[rank_]]; }
  const std::vector<int>& local_ranks() const { return local_ranks_; }
  // Direct copies from the memory of this host's other ranks, when every pair of them may (see
  // peer_memory.hpp); nullptr otherwise.
  const PeerMemory* peer_memory() const { return peer_memory_.get(); }
  // Turns them on; pids[r]: the process of group rank r.
  void enable_peer_memory(std::vector<pid_t> pids);
  // Tells this host's ranks that this one gave up on the group, before it goes on: from then on
  // none of them reads another's memory through this group (the first rank to give up is named).
  void give_up();
  // Whether every rank of the group is on this host.
  bool whole_group() const { return local_index_.size() == local_ranks_.size(); }

  // Bytes of shared memory a group of `local` ranks maps with rings of `ring_bytes`.
  static size_t region_bytes(int local, size_t ring_bytes);

 private:
  size_t index(Lane lane, int from, int to) const {
    const size_t local = local_ranks_.size();
    return static_cast<size_t>(lane) * local * local + static_cast<size_t>(from) * local + to;
  }

  int rank_;
  std::vector<int> local_ranks_;
  std::vector<int> local_index_;  // by group rank: index among local_ranks_, or -1
  void* base_;
  size_t bytes_;
  GivenUpWord* given_up_;  // the region's first line
  std::vector<Doorbell> doorbells_;  // [lane * local + rank]
  std::vector<ByteRing> rings_;  // [index(lane, from, to)]; the diagonal is unused
  std::unique_ptr<PeerMemory> peer_memory_;
};

// What connect_shared_memory found: the links (nullptr when no other rank shares this host, the
// mode is tcp, or the region could not be mapped), and, in words, why single copies are off
// (empty when they are on), which OCCL_DEBUG=INFO reports.
struct SharedMemory {
  std::unique_ptr<ShmLinks> links;
  std::string single_copies_off;
  // Every rank's host, numbered in the order of their lowest ranks; the same on every rank.
  // Empty when not known (OCCL_TRANSPORT=tcp, a group of one).
  std::vector<int> hosts;
};

// Finds the ranks that share this rank's host (same kernel boot, user, and network and pid
// namespaces) and maps a region with them. Every rank of the group must call it, with the links
// `bootstrap` formed first (`links[r]` to rank r). What leads a rank to another process's memory
// (pids, probe addresses, the region's fd) travels on those links, never through the store,
// and every pid is the one its rank stated in its handshake.
SharedMemory connect_shared_memory(Bootstrap& bootstrap, const std::vector<Socket>& links,
                                   const ShmOptions& options);

}  // namespace occl::transport
