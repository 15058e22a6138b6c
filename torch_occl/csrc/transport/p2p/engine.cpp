// The p2p engine's API and its thread: requests applied on the caller's thread under the lock,
// the thread's loop over poll(), and drivers, the waiting callers that read the rings themselves.
#include "../p2p.hpp"

#include "state.hpp"

#include <c10/util/Logging.h>

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <thread>

namespace occl::transport {

using p2p::Completion;
using p2p::Ready;
using p2p::State;

namespace {

constexpr int kMaxPollMillis = 1000;
// Passes between two yields of the core while a driver spins.
constexpr int kYieldEvery = 64;

// Runs completions with no lock held. An exception from one (a bug in a callback) must not end
// the thread running it, which serves every other request.
void run(std::vector<Ready>& due) {
  for (auto& ready : due) {
    try {
      ready.callback(ready.error, ready.source);
    } catch (const std::exception& e) {
      LOG(ERROR) << "occl: a point-to-point completion threw: " << e.what();
    } catch (...) {
      LOG(ERROR) << "occl: a point-to-point completion threw";
    }
  }
}

// Applies `change` under the lock on a caller's thread, wakes the engine's thread if it must
// look again, then runs what completed and drops what the thread ran, outside the lock.
template <typename Change>
void apply(State& state, Change&& change) {
  std::vector<Ready> due;
  std::vector<Completion> finished;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    change(state);
    // The thread, asleep, asked for the pokes it needed then; a new request may need others.
    wake = state.thread_asleep && ((state.drivers == 0 && state.ask_for_pokes()) ||
                                   state.needs_thread());
    due.swap(state.ready);
    finished.swap(state.finished);
  }
  if (wake) state.wake_thread();
  run(due);
}

// Fails a request posted after an abort or shutdown; false if the engine takes it.
bool refused(State& state, Completion& done, int source) {
  if (!state.abort_reason.empty()) {
    state.complete(done, p2p::error(TransportError::Kind::Aborted, state.abort_reason), source);
    return true;
  }
  if (state.stopping) {
    state.complete(done, p2p::error(TransportError::Kind::Aborted, "the backend was shut down"),
                   source);
    return true;
  }
  return false;
}

// A caller waits without reading the rings: the engine's thread reads for it from now on.
void hand_off(State& state) {
  apply(state, [](State& state) { state.unattended = true; });
}

void drive(State& state, const std::function<bool()>& done) {
  if (done()) return;  // a send written at once
  {
    std::unique_lock<std::mutex> lock(state.mutex);
    if (state.stopping || state.spin.count() == 0 || !state.shm) {
      lock.unlock();
      hand_off(state);
      return;
    }
    ++state.drivers;
    // Peers need not poke while this thread reads the rings.
    for (auto& link : state.links) {
      if (link.shared()) link.in->ask_poke(ByteRing::Side::Consumer, false);
    }
  }
  // Spins for up to `spin` with nothing moving: a message longer than a ring streams on.
  Deadline until = Clock::now() + state.spin;
  bool finished = false;
  for (int pass = 1;; ++pass) {
    std::vector<Ready> due;
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      const uint64_t before = state.bytes_moved;
      for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
        if (state.links[peer].shared() && state.links[peer].alive()) state.progress(peer);
      }
      moved = state.bytes_moved != before;
      due.swap(state.ready);
    }
    run(due);
    finished = done();
    if (finished) break;
    const Deadline now = Clock::now();
    if (moved) until = now + state.spin;
    if (now >= until) break;
    if (pass % kYieldEvery == 0) {
      std::this_thread::yield();
    } else {
      cpu_relax();
    }
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!finished) state.unattended = true;
    if (--state.drivers == 0 && state.thread_asleep) {
      wake = state.ask_for_pokes() || state.needs_thread();
    }
  }
  if (wake) state.wake_thread();
}

// Completions the engine's thread ran, kept for a caller's thread to drop.
void keep(State& state, std::vector<Ready>& ran) {
  for (auto& ready : ran) state.finished.push_back(std::move(ready.callback));
  ran.clear();
}

}  // namespace

namespace p2p {

bool State::needs_thread() const {
  for (const auto& link : links) {
    if (!link.sends.empty()) return true;
  }
  return next_deadline() < thread_wakes_at;
}

void State::wake_thread() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
}

}  // namespace p2p

P2PEngine::P2PEngine(int rank, int size, std::vector<Socket> links,
                     std::shared_ptr<ShmLinks> shm, std::optional<PeerMemory> peer_memory,
                     size_t lend_min_bytes, size_t large_min_bytes, std::chrono::microseconds spin,
                     FailureHandler on_peer_failure)
    : state_(std::make_shared<State>()) {
  State& state = *state_;
  state.rank = rank;
  state.on_peer_failure = std::move(on_peer_failure);
  state.peer_memory = std::move(peer_memory);
  state.lend_min_bytes = lend_min_bytes;
  state.large_min_bytes = large_min_bytes;
  state.spin = spin;
  state.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state.wake_fd < 0) {
    throw TransportError(TransportError::Kind::System,
                         std::string("eventfd: ") + std::strerror(errno));
  }
  state.links.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    p2p::Link& link = state.links[r];
    link.socket = std::move(links[r]);
    if (shm && r != rank && shm->reaches(r)) {
      link.out = &shm->to(r, Lane::PointToPoint);
      link.in = &shm->from(r, Lane::PointToPoint);
    }
  }
  state.shm = std::move(shm);
  thread_ = std::thread(loop, state_);
}

P2PEngine::~P2PEngine() {
  // The thread fails what is pending and ends on its own. Not joined: dropping the tensors of
  // those requests may wait for the GIL, which the thread destroying the engine may hold.
  stop(/*only_if_idle=*/false);
  thread_.detach();
}

void P2PEngine::close() { stop(/*only_if_idle=*/true); }

void P2PEngine::stop(bool only_if_idle) {
  std::shared_ptr<ShmLinks> shm;  // unmapped here once the mesh lets go too, not by a late Work
  apply(*state_, [&](State& state) {
    if (only_if_idle && state.awaits_frames()) return;
    state.stopping = true;
    for (auto& link : state.links) link.out = link.in = nullptr;
    shm = std::move(state.shm);
  });
  state_->wake_thread();
}

void P2PEngine::send(int peer, int64_t tag, const void* data, size_t bytes, Deadline deadline,
                     Completion done) {
  apply(*state_, [&](State& state) {
    if (refused(state, done, -1)) return;
    state.add_send(peer, {{p2p::kMagic, p2p::kMessage, tag, bytes},
                          static_cast<const char*>(data), 0, deadline, std::move(done)});
    if (state.links[peer].alive()) state.progress(peer);
  });
}

void P2PEngine::recv(int peer, int64_t tag, void* data, size_t bytes, Deadline deadline,
                     Completion done) {
  apply(*state_, [&](State& state) {
    if (refused(state, done, peer)) return;
    state.add_recv({peer, tag, static_cast<char*>(data), bytes, deadline, std::move(done)});
    // Its message may wait in a ring nobody has read yet.
    for (int from = 0; from < static_cast<int>(state.links.size()); ++from) {
      const p2p::Link& link = state.links[from];
      if ((peer == kAnySource || peer == from) && link.shared() && link.alive()) {
        state.progress(from);
      }
    }
  });
}

P2PEngine::Driver P2PEngine::driver() const {
  return [state = state_](const std::function<bool()>& done) { drive(*state, done); };
}

std::function<void()> P2PEngine::handoff() const {
  return [state = state_] { hand_off(*state); };
}

void P2PEngine::announce_failure(const std::string& report, Deadline flush_by) {
  struct Flushed {
    std::mutex mutex;
    std::condition_variable done;
    size_t pending = 0;
  };
  auto flushed = std::make_shared<Flushed>();
  auto text = std::make_shared<const std::string>(report.substr(0, p2p::kMaxReportBytes));
  apply(*state_, [&](State& state) {
    std::lock_guard<std::mutex> lock(flushed->mutex);  // its completions run after apply's lock
    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      p2p::Link& link = state.links[peer];
      if (peer == state.rank || !link.alive()) continue;
      ++flushed->pending;
      p2p::SendRequest request{{p2p::kMagic, p2p::kGaveUp, 0, text->size()}, text->data(), 0,
                               Deadline::max(), [flushed](std::exception_ptr, int) {
                                 std::lock_guard<std::mutex> lock(flushed->mutex);
                                 --flushed->pending;
                                 flushed->done.notify_all();
                               }};
      request.report = text;
      link.sends.push_back(std::move(request));
      state.progress(peer);
    }
  });
  std::unique_lock<std::mutex> lock(flushed->mutex);
  flushed->done.wait_until(lock, flush_by, [&] { return flushed->pending == 0; });
}

void P2PEngine::abort() {
  apply(*state_, [](State& state) {
    if (state.abort_reason.empty()) state.abort_reason = "the communicator was aborted";
    state.fail_all(TransportError::Kind::Aborted, state.abort_reason);
  });
}

void P2PEngine::loop(std::shared_ptr<State> shared) {
  ::pthread_setname_np(::pthread_self(), "occl-p2p");  // for top -H, gdb and /proc
  State& state = *shared;
  std::vector<pollfd> fds;
  std::vector<int> fd_peers;  // the rank of fds[i + 1]
  std::vector<Ready> due;
  std::unique_lock<std::mutex> lock(state.mutex);
  for (;;) {
    if (state.stopping) {
      state.fail_all(TransportError::Kind::Aborted, "the backend was shut down");
      due.swap(state.ready);
      lock.unlock();
      run(due);
      lock.lock();
      keep(state, due);
      return;
    }
    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      p2p::Link& link = state.links[peer];
      if (!link.alive()) continue;
      if (link.shared()) {
        try {
          state.drain_pokes(peer);
        } catch (const TransportError& e) {
          state.progress(peer);  // what the peer wrote before it closed still counts
          state.fail_link(peer, e.kind(), e.what());
          continue;
        }
      }
      state.progress(peer);
    }
    state.buffer_lent(Clock::now());
    state.expire(Clock::now());
    const bool moved = state.ask_for_pokes();

    fds.clear();
    fd_peers.clear();
    fds.push_back({state.wake_fd, POLLIN, 0});
    for (int peer = 0; peer < static_cast<int>(state.links.size()); ++peer) {
      const p2p::Link& link = state.links[peer];
      if (!link.alive()) continue;
      // A payload left in the socket waits; a shared link's socket carries only pokes.
      short events = link.buffer_at && !link.shared() ? 0 : POLLIN;
      if (!link.shared() && !link.sends.empty()) events |= POLLOUT;
      fds.push_back({link.socket.fd(), events, 0});
      fd_peers.push_back(peer);
    }
    const Deadline next =
        std::min(state.next_deadline(), Clock::now() + std::chrono::milliseconds(kMaxPollMillis));
    state.thread_asleep = !moved;
    state.thread_wakes_at = next;
    due.swap(state.ready);
    lock.unlock();

    run(due);
    if (!moved) {
      ::poll(fds.data(), fds.size(), std::min(millis_until(next) + 1, kMaxPollMillis));
    }
    uint64_t count;
    [[maybe_unused]] ssize_t n = ::read(state.wake_fd, &count, sizeof(count));

    lock.lock();
    state.thread_asleep = false;
    keep(state, due);
    // A payload held in a broken connection is read at once, to meet the connection's end.
    for (size_t i = 1; i < fds.size(); ++i) {
      p2p::Link& link = state.links[fd_peers[i - 1]];
      if ((fds[i].revents & (POLLERR | POLLHUP)) && link.buffer_at) link.buffer_at = Clock::now();
    }
  }
}

}  // namespace occl::transport
