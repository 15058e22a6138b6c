// Point-to-point messages with tags, on links of their own: the p2p lane's shared-memory rings
// to the ranks on this host (shm.hpp), sockets to the others.
//
// send/recv may be issued in any order on the two sides (a rank may post a receive before or
// after the matching send arrives, and receives for different tags may be posted out of order),
// so unlike collectives they cannot run one after another on the group's worker. Posting returns
// at once. The engine's thread moves what is left and completes it; a send is written at once
// when its link has room, and a thread waiting for a request reads the rings itself for a while
// (driver()), so a message between ranks on one host wakes no thread. A message matches the
// earliest posted receive with its sender (or any sender) and tag; a message nobody waits for yet
// is buffered until a receive for it is posted. A large one first stays in the socket (or ring)
// for up to kReceiveGrace, so a receive posted meanwhile reads it straight from there rather than
// through a buffer.
//
// Between ranks that may copy from each other's memory (peer_memory.hpp), a very large message
// is lent rather than sent (below that, two copies pipelined through a ring, one on each side,
// measure faster than one cross-memory copy): the sender passes where it lies, the receiver copies it out of the
// sender's memory (peer_buffer.hpp: through its mapping when the message lies in a shared
// segment; straight into the receive, if one is posted within kReceiveGrace; else into a
// buffer, as for any message nobody waits for), then tells the sender its buffer is free, which
// completes the send. A sender that gives up on a lent message first sets a word the receiver
// reads after each copy, so a receiver never keeps bytes of a buffer reused meanwhile.
//
// The links also carry one kind of message of the group's own: a rank that gave up on a
// collective tells every other rank why (announce_failure), so they fail at once instead of
// waiting for it. The engine's thread reads these whatever the ranks are doing, even while a
// collective is stuck, and hands them to the `on_peer_failure` handler.
//
// The implementation, by concern, is in p2p/ (state.hpp says which file does what).
#pragma once

#include "peer_memory.hpp"
#include "shm.hpp"
#include "socket.hpp"

#include <optional>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace occl::transport {

namespace p2p {
struct State;
}

class P2PEngine {
 public:
  // Called exactly once per request: nullptr or the error, and the rank the message came from
  // (receives) or -1 (sends). On whichever thread completed the request (the engine's, or a
  // caller's inside send(), recv() or a driver), never with the engine's lock held.
  using Completion = std::function<void(std::exception_ptr, int source)>;
  static constexpr int kAnySource = -1;
  // Called with a rank's report that it gave up on a collective, as a completion is: on the
  // thread that read the report, with no lock held.
  using FailureHandler = std::function<void(int peer, const std::string& report)>;
  // See driver().
  using Driver = std::function<void(const std::function<bool()>& done)>;

  // links[r] is the connection to rank r (invalid for r == rank). Messages to the ranks `shm`
  // reaches travel through its point-to-point rings. Messages of at least `lend_min_bytes` are
  // lent with `peer_memory`; over TCP, messages of at least `large_min_bytes` wait in the
  // socket for their receive (through a ring, those of a pass or more). A waiting caller reads
  // the rings itself for up to `spin` (driver()).
  P2PEngine(int rank, int size, std::vector<Socket> links,
            std::shared_ptr<ShmLinks> shm = nullptr,
            std::optional<PeerMemory> peer_memory = std::nullopt,
            size_t lend_min_bytes = std::numeric_limits<size_t>::max(),
            size_t large_min_bytes = std::numeric_limits<size_t>::max(),
            std::chrono::microseconds spin = std::chrono::microseconds(0),
            FailureHandler on_peer_failure = nullptr);
  ~P2PEngine();  // fails what is still pending; the thread then ends on its own
  P2PEngine(const P2PEngine&) = delete;
  P2PEngine& operator=(const P2PEngine&) = delete;

  // `data` must stay valid until `done` runs. Written at once when the link has room.
  void send(int peer, int64_t tag, const void* data, size_t bytes, Deadline deadline,
            Completion done);
  // `peer` may be kAnySource. A message of another size than `bytes` fails the receive.
  void recv(int peer, int64_t tag, void* data, size_t bytes, Deadline deadline, Completion done);

  // For a thread about to wait for a request: it moves the messages of the shared-memory links
  // itself, until `done()` or for `spin`, whichever comes first, so that a message between
  // ranks on one host wakes no thread. Stays callable after the engine is gone.
  Driver driver() const;
  // For a thread that waits for a request without moving it (it polls, or waits on a future):
  // the engine's thread then reads what arrives through the rings, poked by the peers, until no
  // request awaits frames. Until then a receive is left to its waiter's driver: a poke would
  // only cost the waiter two context switches on its core. Stays callable after the engine is
  // gone.
  std::function<void()> handoff() const;

  // Sends `report` to every other rank's failure handler, after what is queued to it already;
  // returns once the kernel has taken every copy, or at `flush_by`, so that a process which
  // exits right after has not taken its reports with it.
  void announce_failure(const std::string& report, Deadline flush_by);

  // Fails every pending and future request. Thread-safe.
  void abort();

  // The group shut down: with no request in flight, the engine stops now and lets go of the
  // rings (the region is unmapped once the mesh lets go too); a request in flight keeps them
  // until the engine goes, so that it can still complete, or fail at abort().
  void close();

 private:
  // Fails what is pending (only_if_idle: unless something is), ends the thread and lets go of
  // the rings.
  void stop(bool only_if_idle);
  static void loop(std::shared_ptr<p2p::State> state);

  // Shared with the engine's thread and with drivers, so that an engine destroyed from one of
  // its own completions does not pull the state from under them.
  std::shared_ptr<p2p::State> state_;
  std::thread thread_;
};

}  // namespace occl::transport
