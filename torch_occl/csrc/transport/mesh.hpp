// A full mesh of framed connections between the ranks of one group: shared-memory rings to the
// ranks on this host (see shm.hpp), TCP to the others.
//
// Algorithms describe one step of communication as a set of sends and receives and call
// `exchange`, which progresses all of them at once with poll(): a ring step sends to the next
// rank while it receives from the previous one, without threads and without deadlock. Every
// message carries a header (magic, per-link sequence number, size) that the receiver checks
// before it trusts the payload, so a desynchronised peer is an error, never silent corruption.
//
// When a rank gives up on a collective (a timeout, a closed peer, a bad frame), its runtime tells
// the other ranks (P2PEngine::announce_failure), whose engines hand the report to
// `peer_gave_up`: their current or next collective fails at once, naming that rank and its cause,
// instead of waiting out its own timeout for a rank that left.
//
// Waiting: with transfers pending and nothing moving, a rank spins briefly, then sleeps in poll()
// (TCP) or on its doorbell (shared memory only). While asleep on the doorbell it checks, a few
// times a second, that its shared-memory peers' sockets are still open: a killed peer is noticed
// without waiting for the timeout.
#pragma once

#include "channel.hpp"
#include "shm.hpp"
#include "socket.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace occl::transport {

struct SendOp {
  int peer;
  const void* data;
  size_t bytes;
};

struct RecvOp {
  int peer;
  void* data;
  size_t bytes;  // the receiver states the size it expects; anything else is a protocol error
};

// Whether an exchange carries the coming collective's agreement records (Mesh::carry_records).
enum class Records {
  // Sent and checked in a round of their own before the exchange, if any are pending.
  SettledFirst,
  // Ahead of the exchange's message to every peer, both ways (a message of their own where it
  // has none). Only for an algorithm's first exchange of a collective, when every rank makes it:
  // each receives from every peer exactly what that peer sends it.
  Carried,
};

class Mesh {
 public:
  // peers[r] is the connection to rank r (invalid for r == rank); messages to the ranks `shm`
  // reaches travel through shared memory, the socket then only tells whether the peer lives.
  // `hosts`: every rank's host, as SharedMemory::hosts (empty when not known).
  Mesh(int rank, int size, std::vector<Socket> peers, std::shared_ptr<ShmLinks> shm,
       std::vector<int> hosts = {});
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Runs every send and receive to completion, or throws TransportError (timeout, a closed
  // peer, a bad frame, abort). At most one send and one receive per peer per call.
  void exchange(const std::vector<SendOp>& sends, const std::vector<RecvOp>& recvs,
                Deadline deadline, Records records = Records::SettledFirst);

  // The records of the coming collective's agreement check (occl_kit/signature.hpp): this
  // rank's `mine`, peer r's into `theirs + r * bytes`, then `check` (which throws on a
  // mismatch). They travel with the collective's first exchange, or in a round of their own
  // before it (Records). A peer whose record differs from `mine` byte for byte runs another
  // collective: what came with its record is read and dropped, never delivered.
  void carry_records(const void* mine, void* theirs, size_t bytes, std::function<void()> check);

  // A round of records only: `mine` to every other rank, rank r's into `theirs + r * bytes`;
  // a payload that came with a peer's record (its collective carried it) is read and dropped.
  // Records still pending (carry_records) are forgotten.
  // Throws TransportError (Timeout: "rank(s) 1, 3 did not join") when ranks do not arrive.
  void exchange_records(const void* mine, void* theirs, size_t bytes, Deadline deadline);

  // Copies straight from and into other ranks' memory, when every rank of the group may (all on
  // this host, cross-memory attach permitted; see peer_memory.hpp); nullptr otherwise.
  const PeerMemory* peer_memory() const {
    return shm_ && shm_->whole_group() ? shm_->peer_memory() : nullptr;
  }
  // The same between this rank and the others of its host, whether or not the group spans
  // hosts (algorithms/hierarchical.hpp copies within a host with it); nullptr when they may not.
  const PeerMemory* host_memory() const { return shm_ ? shm_->peer_memory() : nullptr; }
  // The shared-memory links, if any (subgroup.hpp reads which ranks share this host).
  const ShmLinks* shm_links() const { return shm_.get(); }
  // Every rank's host (SharedMemory::hosts), the same on every rank; empty when not known.
  const std::vector<int>& hosts() const { return hosts_; }

  // A buffer for an algorithm's data during one collective, kept for the next: the small
  // collectives, which run most often, then allocate nothing (a fresh block of a few KiB costs
  // glibc a sweep of its small free blocks each time), and large ones fault in no fresh pages.
  char* scratch(size_t bytes);

  // How long a waiting rank spins before it sleeps (0 when a host's ranks outnumber its cores).
  std::chrono::microseconds spin() const { return spin_; }

  // Which peers this rank reaches through shared memory and which over TCP, and how long it
  // spins before it sleeps: "shared memory to ranks 1, 2; TCP to ranks 3; spins 200 us".
  std::string describe() const;

  // Makes any current and future exchange throw TransportError::Kind::Aborted with `cause` (the
  // first cause given wins), and gives up on the group. Thread-safe.
  void abort(const std::string& cause = "the communicator was aborted");
  // This rank is done with the group, whether an op failed or it shuts down: from now on no
  // rank of its host reads another's memory through the group (ShmLinks::give_up), so that one
  // that is late or was stopped and resumes fails instead of reading buffers the others reuse.
  // Thread-safe.
  void give_up();

  // `peer` gave up on one of the group's collectives, for the reason `report`: aborts the mesh
  // with "rank P gave up: <report>". Thread-safe.
  void peer_gave_up(int peer, const std::string& report);
  // The reports that `peers` sent, waiting until `until` for those not in yet. Thread-safe.
  std::map<int, std::string> reports_from(const std::vector<int>& peers, Deadline until);

 private:
  struct Link {
    Socket socket;
    ByteRing* out = nullptr;  // shared-memory rings, when the peer is on this host
    ByteRing* in = nullptr;
    uint64_t sent = 0;      // messages sent on this link
    uint64_t received = 0;  // messages received on this link
  };
  struct Transfer;
  struct Pass;
  Channel channel(int peer) const {
    const Link& link = links_[peer];
    return {peer, link.socket.fd(), link.out, link.in};
  }
  struct PendingRecords {
    const char* mine = nullptr;
    char* theirs = nullptr;
    size_t bytes = 0;
    std::function<void()> check;  // empty: none pending
  };

  // An exchange: the transfers are added to sends_ and recvs_, then run. A record goes ahead of
  // the payload; a received one that differs from `expected` (or any, without `expected`) has
  // its payload dropped.
  void add_send(int peer, const void* data, size_t bytes, const void* record = nullptr,
                size_t record_bytes = 0);
  void add_recv(int peer, void* data, size_t bytes, void* record = nullptr,
                size_t record_bytes = 0, const void* expected = nullptr);
  // The pending records, in a round of their own, then checked.
  void settle_records(Deadline deadline);
  void run_transfers(Deadline deadline);
  Pass progress(std::vector<Transfer>& sends, std::vector<Transfer>& recvs);
  void sleep_on_doorbell(const std::vector<Transfer>& sends,
                         const std::vector<Transfer>& recvs, Deadline deadline);
  void check_alive(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs);
  // poll() on the abort eventfd and the TCP links of the pending transfers.
  void poll_sockets(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs,
                    int timeout_ms);
  static std::vector<int> pending_peers(const std::vector<Transfer>& sends,
                                        const std::vector<Transfer>& recvs);
  std::string abort_cause();
  static std::string describe_pending(const std::vector<Transfer>& sends,
                                      const std::vector<Transfer>& recvs);

  int rank_;
  int size_;
  std::vector<Link> links_;
  std::shared_ptr<ShmLinks> shm_;  // shared with the group's p2p engine
  std::vector<int> hosts_;
  // The exchange in progress. Kept from one exchange to the next (a mesh runs one at a time),
  // so that a small collective's exchanges allocate nothing.
  std::vector<Transfer> sends_;
  std::vector<Transfer> recvs_;
  PendingRecords records_;
  std::vector<char> dropped_;  // where payloads that are not this collective's are read into
  std::vector<char> scratch_;
  std::chrono::microseconds spin_;  // how long a waiting rank spins before it sleeps
  std::atomic<bool> aborted_{false};  // checked on every pass, even while bytes keep moving
  int abort_fd_;  // an eventfd that abort() makes readable, so a waiting poll() wakes up
  std::mutex failure_mutex_;
  std::condition_variable report_arrived_;
  std::string abort_cause_;                    // guarded by failure_mutex_
  std::map<int, std::string> peer_reports_;    // guarded by failure_mutex_
};

}  // namespace occl::transport
