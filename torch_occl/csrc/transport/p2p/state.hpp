// The p2p engine's state, shared by its thread and the threads that call it.
//
// Whoever holds `mutex` moves messages: the engine's thread after poll() wakes it, a caller
// posting a request (its send is written at once when the link has room), and a caller waiting
// for one (drive(): it reads the shared-memory rings itself for a while, so a message between
// ranks on one host wakes no thread). Completions run after the lock is let go (they run user
// code, which may post again), on the thread that completed the request.
//
// The files around it, by concern: link_io.cpp moves frames through a link's channel;
// matching.cpp pairs messages with receives; lending.cpp copies lent messages; failures.cpp
// fails links, requests and deadlines; engine.cpp is the thread and the API.
#pragma once

#include "link.hpp"

#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace occl::transport::p2p {

// How long a large message nobody receives yet waits (lent: in its sender's memory; sent: in the
// socket or ring) before the receiver buffers it anyway: long enough for a receive posted right
// after, short enough that a send completes without one, so ranks that both send first never
// deadlock.
constexpr auto kReceiveGrace = std::chrono::milliseconds(1);

// A completion due to run, once its runner has let go of the lock.
struct Ready {
  Completion callback;
  std::exception_ptr error;
  int source;
};

struct State {
  int rank = 0;
  int wake_fd = -1;  // an eventfd: the engine's thread has something new to look at
  std::shared_ptr<ShmLinks> shm;  // keeps the rings mapped while anyone may touch them
  std::optional<PeerMemory> peer_memory;  // set: messages of lend_min_bytes or more are lent
  size_t lend_min_bytes = 0;
  size_t large_min_bytes = 0;  // a TCP message this large waits in the socket for its receive
  std::chrono::microseconds spin{0};  // how long a waiting caller reads the rings itself
  P2PEngine::FailureHandler on_peer_failure;

  std::mutex mutex;  // guards everything below
  std::vector<Link> links;
  std::list<RecvRequest> posted;  // receives waiting for a message, in posting order
  bool stopping = false;
  std::string abort_reason;
  std::vector<Ready> ready;
  int drivers = 0;             // callers reading the rings themselves (drive())
  // A caller waits without reading the rings (P2PEngine::handoff(), or its driver stopped
  // spinning): the engine's thread must read what arrives. Cleared once no request awaits frames.
  bool unattended = false;
  uint64_t bytes_moved = 0;    // through any link, ever: a driver spins on while they move
  bool thread_asleep = false;  // in poll(), until thread_wakes_at at the latest
  Deadline thread_wakes_at{};
  // Completions that ran on the engine's thread, dropped by the next caller or by the engine's
  // destructor, never there: they hold tensors, and dropping a tensor Python also holds takes
  // the GIL, which a thread cannot wait for while the interpreter exits.
  std::vector<Completion> finished;

  ~State();

  // failures.cpp
  void complete(Completion& callback, std::exception_ptr failure, int source);
  void fail_link(int peer, TransportError::Kind kind, const std::string& why);
  void fail_all(TransportError::Kind kind, const std::string& why);
  void expire(Deadline now);
  Deadline next_deadline() const;
  bool every_link_failed() const;

  // link_io.cpp
  // Moves what it can on the link (sends, then what arrived); a failure fails the link.
  void progress(int peer);
  void progress_sends(int peer);
  void progress_recv(int peer);
  // Reads the pokes off a shared link's socket; throws when the peer closed it.
  void drain_pokes(int peer);
  void poke(int peer);
  // Whether a request waits for frames from the peers (a posted receive, a send waiting for
  // room or for its copy, a message half read).
  bool awaits_frames() const;
  // Asks the peers for the pokes the engine's thread needs while it sleeps (awaits_frames());
  // true if a ring moved meanwhile.
  bool ask_for_pokes();

  // engine.cpp
  // Whether the engine's thread, asleep since it last looked, must look again: sends wait for
  // room, or a deadline comes before it would wake.
  bool needs_thread() const;
  void wake_thread();

  // matching.cpp
  void add_send(int peer, SendRequest request);
  void add_recv(RecvRequest request);
  void start_message(int peer);
  void finish_message(int peer);

  // lending.cpp
  void on_lent(int peer);
  void on_copied(int peer, uint64_t id);
  void receive_lent(int peer, int64_t tag, const LentArrival& lent, RecvRequest& recv);
  std::exception_ptr copy_lent(int peer, const LentArrival& lent, void* into);
  // Queues the answer that this rank is done with a lent message; `written` (if any) runs once
  // the kernel has it, or at once if the link failed.
  void send_copied(int peer, uint64_t id, Completion written = nullptr);
  void buffer_lent(Deadline now);
};

}  // namespace occl::transport::p2p
