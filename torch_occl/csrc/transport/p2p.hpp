// Point-to-point messages with tags, on links of their own, progressed by one thread.
//
// send/recv may be issued in any order on the two sides (a rank may post a receive before or
// after the matching send arrives, and receives for different tags may be posted out of order),
// so unlike collectives they cannot run one after another on the group's worker. Posting returns
// at once; the engine's thread moves the bytes and calls the completion. A message matches the
// earliest posted receive with its sender (or any sender) and tag; a message nobody waits for yet
// is buffered until a receive for it is posted. A large one (at least `large_min_bytes`) first
// stays in the socket for up to kReceiveGrace, so a receive posted meanwhile reads it straight
// from the socket rather than through a buffer.
//
// Between ranks that may copy from each other's memory (peer_memory.hpp), a large message is
// lent rather than sent: the sender passes where it lies, the receiver copies it out of the
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
#pragma once

#include "peer_memory.hpp"
#include "socket.hpp"

#include <optional>

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

class P2PEngine {
 public:
  // Called exactly once per request, on the engine's thread: nullptr or the error, and the rank
  // the message came from (receives) or -1 (sends).
  using Completion = std::function<void(std::exception_ptr, int source)>;
  static constexpr int kAnySource = -1;
  // Called on the engine's thread with a rank's report that it gave up on a collective.
  using FailureHandler = std::function<void(int peer, const std::string& report)>;

  // links[r] is the connection to rank r (invalid for r == rank). Messages of at least
  // `large_min_bytes` are lent with `peer_memory`, and wait in the socket for their receive
  // without it.
  P2PEngine(int rank, int size, std::vector<Socket> links,
            std::optional<PeerMemory> peer_memory = std::nullopt,
            size_t large_min_bytes = std::numeric_limits<size_t>::max(),
            FailureHandler on_peer_failure = nullptr);
  ~P2PEngine();  // fails what is still pending; the thread then ends on its own
  P2PEngine(const P2PEngine&) = delete;
  P2PEngine& operator=(const P2PEngine&) = delete;

  // `data` must stay valid until `done` runs.
  void send(int peer, int64_t tag, const void* data, size_t bytes, Deadline deadline,
            Completion done);
  // `peer` may be kAnySource. A message of another size than `bytes` fails the receive.
  void recv(int peer, int64_t tag, void* data, size_t bytes, Deadline deadline, Completion done);

  // Sends `report` to every other rank's failure handler, after what is queued to it already;
  // returns once the kernel has taken every copy, or at `flush_by`, so that a process which
  // exits right after has not taken its reports with it.
  void announce_failure(const std::string& report, Deadline flush_by);

  // Fails every pending and future request. Thread-safe.
  void abort();

 private:
  struct State;
  static void loop(std::shared_ptr<State> state);
  void post(std::function<void(State&)> request);

  // Shared with the engine's thread (which alone touches it, but for its inbox), so that an
  // engine destroyed from one of its own completions does not pull the state from under it.
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace occl::transport
