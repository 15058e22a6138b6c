#include "mesh.hpp"

#include "channel.hpp"

#include "../tuning.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

namespace occl::transport {
namespace {

constexpr uint32_t kFrameMagic = 0x4f43434c;  // "OCCL"
// Idle passes between two yields of the core while spinning.
constexpr int kYieldEvery = 64;
// How often a rank asleep on its doorbell looks at its shared-memory peers' sockets.
constexpr int kLivenessCheckMs = 50;

struct FrameHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t sequence;  // this message's index on its link
  uint64_t bytes;     // payload size
};

void check_header(const FrameHeader& h, int peer, size_t expected_bytes, uint64_t expected_sequence) {
  if (h.magic == kFrameMagic && h.sequence == expected_sequence && h.bytes == expected_bytes) return;
  std::ostringstream msg;
  msg << "bad frame from rank " << peer << ": expected message #" << expected_sequence << " of "
      << expected_bytes << " bytes, got ";
  if (h.magic != kFrameMagic) {
    msg << "a frame with a wrong magic number";
  } else {
    msg << "message #" << h.sequence << " of " << h.bytes << " bytes";
  }
  msg << " (do the ranks call the same collectives with the same sizes?)";
  throw TransportError(TransportError::Kind::Protocol, msg.str());
}

}  // namespace

// One direction of one message in flight: header then payload, `done` bytes of both so far.
struct Mesh::Transfer {
  int peer;
  char* payload;
  size_t bytes;
  FrameHeader header;
  size_t done = 0;
  bool header_checked = false;

  size_t total() const { return sizeof(FrameHeader) + bytes; }
  bool finished() const { return done == total(); }

  // The unfinished part of header and payload, as at most two iovecs.
  int pending_iov(iovec* iov) {
    int n = 0;
    if (done < sizeof(FrameHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&header) + done, sizeof(FrameHeader) - done};
      if (bytes > 0) iov[n++] = {payload, bytes};
    } else {
      size_t offset = done - sizeof(FrameHeader);
      iov[n++] = {payload + offset, bytes - offset};
    }
    return n;
  }
};

// What one pass over the pending transfers did and what it still waits for.
struct Mesh::Pass {
  bool moved = false;
  bool pending = false;
  bool waits_on_tcp = false;
  bool waits_on_shm = false;
};

Mesh::Mesh(int rank, int size, std::vector<Socket> peers, std::shared_ptr<ShmLinks> shm,
           std::vector<int> hosts)
    : rank_(rank),
      size_(size),
      links_(static_cast<size_t>(size)),
      shm_(std::move(shm)),
      hosts_(std::move(hosts)) {
  for (int r = 0; r < size; ++r) {
    links_[r].socket = std::move(peers[r]);
    if (shm_ && r != rank && shm_->reaches(r)) {
      links_[r].out = &shm_->to(r);
      links_[r].in = &shm_->from(r);
    }
  }
  abort_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (abort_fd_ < 0) throw_io(rank, "eventfd for", errno);
  const bool oversubscribed =
      shm_ && shm_->local_ranks().size() > std::max(1u, std::thread::hardware_concurrency());
  spin_ = std::chrono::microseconds(oversubscribed ? 0 : Tuning::get().spin_us);
}

Mesh::~Mesh() { ::close(abort_fd_); }

std::string Mesh::describe() const {
  std::string shared, tcp;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::string& list = links_[r].out ? shared : tcp;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  return "shared memory to ranks " + (shared.empty() ? "(none)" : shared) + "; TCP to ranks " +
         (tcp.empty() ? "(none)" : tcp) + "; spins " + std::to_string(spin_.count()) +
         " us before it sleeps";
}

void Mesh::abort(const std::string& cause) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (abort_cause_.empty()) abort_cause_ = cause;
  }
  aborted_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(abort_fd_, &one, sizeof(one));
  if (shm_) shm_->own_doorbell().ring();
}

void Mesh::peer_gave_up(int peer, const std::string& report) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    peer_reports_.emplace(peer, report);
  }
  report_arrived_.notify_all();
  abort("rank " + std::to_string(peer) + " gave up: " + report);
}

std::map<int, std::string> Mesh::reports_from(const std::vector<int>& peers, Deadline until) {
  std::unique_lock<std::mutex> lock(failure_mutex_);
  auto all_in = [&] {
    return std::all_of(peers.begin(), peers.end(),
                       [&](int peer) { return peer_reports_.count(peer) > 0; });
  };
  report_arrived_.wait_until(lock, until, all_in);
  std::map<int, std::string> reports;
  for (int peer : peers) {
    auto it = peer_reports_.find(peer);
    if (it != peer_reports_.end()) reports.insert(*it);
  }
  return reports;
}

std::string Mesh::abort_cause() {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return abort_cause_;
}

Mesh::Pass Mesh::progress(std::vector<Transfer>& sends, std::vector<Transfer>& recvs) {
  Pass pass;
  iovec iov[2];
  for (auto& t : sends) {
    if (t.finished()) continue;
    Link& link = links_[t.peer];
    int count = t.pending_iov(iov);
    size_t n = channel(t.peer).write(iov, count);
    t.done += n;
    pass.moved |= n > 0;
    if (t.finished()) continue;
    pass.pending = true;
    (link.out ? pass.waits_on_shm : pass.waits_on_tcp) = true;
  }
  for (auto& t : recvs) {
    if (t.finished()) continue;
    Link& link = links_[t.peer];
    int count = t.pending_iov(iov);
    size_t n = channel(t.peer).read(iov, count);
    t.done += n;
    pass.moved |= n > 0;
    if (!t.header_checked && t.done >= sizeof(FrameHeader)) {
      check_header(t.header, t.peer, t.bytes, link.received);
      t.header_checked = true;
      ++link.received;
    }
    if (t.finished()) continue;
    pass.pending = true;
    (link.in ? pass.waits_on_shm : pass.waits_on_tcp) = true;
  }
  return pass;
}

std::string Mesh::describe_pending(const std::vector<Transfer>& sends,
                                   const std::vector<Transfer>& recvs, Waiting waiting) {
  std::ostringstream out;
  if (waiting == Waiting::ForRanksToJoin) {
    out << "rank(s) ";
    const char* sep = "";
    for (const auto& t : recvs) {
      if (!t.finished()) out << sep << t.peer, sep = ", ";
    }
    out << " did not join";
    return out.str();
  }
  out << "still ";
  const char* sep = "";
  for (const auto& t : sends) {
    if (!t.finished()) out << sep << "sending to rank " << t.peer, sep = ", ";
  }
  for (const auto& t : recvs) {
    if (!t.finished()) out << sep << "receiving from rank " << t.peer, sep = ", ";
  }
  return out.str();
}

std::vector<int> Mesh::pending_peers(const std::vector<Transfer>& sends,
                                     const std::vector<Transfer>& recvs) {
  std::vector<int> peers;
  for (const auto* list : {&sends, &recvs}) {
    for (const auto& t : *list) {
      if (!t.finished() && std::find(peers.begin(), peers.end(), t.peer) == peers.end()) {
        peers.push_back(t.peer);
      }
    }
  }
  return peers;
}

void Mesh::check_alive(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs) {
  std::vector<pollfd> fds;
  std::vector<int> peers;
  for (const auto* list : {&sends, &recvs}) {
    for (const auto& t : *list) {
      if (t.finished()) continue;
      fds.push_back({links_[t.peer].socket.fd(), POLLRDHUP, 0});
      peers.push_back(t.peer);
    }
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) throw_closed(peers[i]);
  }
}

void Mesh::sleep_on_doorbell(const std::vector<Transfer>& sends,
                             const std::vector<Transfer>& recvs, Deadline deadline) {
  // What may have moved between the last pass and counting as a sleeper.
  auto ready = [&] {
    if (aborted_) return true;
    for (const auto& t : sends) {
      if (!t.finished() && links_[t.peer].out->writable()) return true;
    }
    for (const auto& t : recvs) {
      if (!t.finished() && links_[t.peer].in->readable()) return true;
    }
    return false;
  };
  const int timeout_ms = std::min(kLivenessCheckMs, millis_until(deadline));
  if (shm_->own_doorbell().sleep_unless(ready, timeout_ms)) check_alive(sends, recvs);
}

void Mesh::exchange(const std::vector<SendOp>& send_ops, const std::vector<RecvOp>& recv_ops,
                    Deadline deadline) {
  sends_.clear();
  recvs_.clear();
  for (const auto& op : send_ops) add_send(op.peer, op.data, op.bytes);
  for (const auto& op : recv_ops) add_recv(op.peer, op.data, op.bytes);
  run_transfers(deadline, Waiting::ForData);
}

void Mesh::exchange_with_all(const void* mine, void* everyone, size_t bytes, Deadline deadline) {
  sends_.clear();
  recvs_.clear();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    add_send(peer, mine, bytes);
    add_recv(peer, static_cast<char*>(everyone) + peer * bytes, bytes);
  }
  run_transfers(deadline, Waiting::ForRanksToJoin);
}

void Mesh::add_send(int peer, const void* data, size_t bytes) {
  Link& link = links_.at(peer);
  FrameHeader header{kFrameMagic, 0, link.sent++, bytes};
  sends_.push_back(Transfer{peer, static_cast<char*>(const_cast<void*>(data)), bytes, header});
}

void Mesh::add_recv(int peer, void* data, size_t bytes) {
  recvs_.push_back(Transfer{peer, static_cast<char*>(data), bytes, FrameHeader{}});
}

void Mesh::run_transfers(Deadline deadline, Waiting waiting) {
  std::vector<Transfer>& sends = sends_;
  std::vector<Transfer>& recvs = recvs_;
  Clock::time_point idle_since{};  // when passes stopped moving bytes
  int idle_passes = 0;
  for (;;) {
    if (aborted_) throw TransportError(TransportError::Kind::Aborted, abort_cause());
    Pass pass = progress(sends, recvs);
    if (!pass.pending) return;
    if (pass.moved) {
      idle_since = Clock::time_point{};
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      throw TransportError(TransportError::Kind::Timeout, describe_pending(sends, recvs, waiting),
                           pending_peers(sends, recvs));
    }
    if (idle_since == Clock::time_point{}) idle_since = now;
    if (now - idle_since < spin_) {
      // Mostly pause; now and then yield, in case a thread this rank needs shares the core.
      if (++idle_passes % kYieldEvery == 0) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
      continue;
    }
    if (!pass.waits_on_tcp) {
      sleep_on_doorbell(sends, recvs, deadline);
      continue;
    }
    // TCP: poll() wakes on the sockets; mixed with shared memory it wakes often enough to see
    // the rings move too.
    poll_sockets(sends, recvs, pass.waits_on_shm ? 1 : millis_until(deadline));
  }
}

void Mesh::poll_sockets(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs,
                        int timeout_ms) {
  std::vector<pollfd> fds{{abort_fd_, POLLIN, 0}};
  for (const auto& t : sends) {
    if (!t.finished() && !links_[t.peer].out) fds.push_back({links_[t.peer].socket.fd(), POLLOUT, 0});
  }
  for (const auto& t : recvs) {
    if (!t.finished() && !links_[t.peer].in) fds.push_back({links_[t.peer].socket.fd(), POLLIN, 0});
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
    throw_io(rank_, "poll on", errno);
  }
}

}  // namespace occl::transport
