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

// `exact_size`: the frame must hold `expected_bytes`; else (a frame with a record) at least that.
void check_header(const FrameHeader& h, int peer, size_t expected_bytes,
                  uint64_t expected_sequence, bool exact_size) {
  const bool size_ok = exact_size ? h.bytes == expected_bytes : h.bytes >= expected_bytes;
  if (h.magic == kFrameMagic && h.sequence == expected_sequence && size_ok) return;
  std::ostringstream msg;
  msg << "bad frame from rank " << peer << ": expected message #" << expected_sequence << " of "
      << (exact_size ? "" : "at least ") << expected_bytes << " bytes, got ";
  if (h.magic != kFrameMagic) {
    msg << "a frame with a wrong magic number";
  } else {
    msg << "message #" << h.sequence << " of " << h.bytes << " bytes";
  }
  msg << " (do the ranks call the same collectives with the same sizes?)";
  throw TransportError(TransportError::Kind::Protocol, msg.str());
}

}  // namespace

// One direction of one message in flight: header, record (if any), payload; `done` bytes of
// them so far.
struct Mesh::Transfer {
  int peer;
  char* payload;
  size_t bytes;
  FrameHeader header;
  char* record = nullptr;
  size_t record_bytes = 0;
  // Receiving: the record the payload's sender must have sent for the payload to be delivered;
  // nullptr: a round of records only, whatever comes after one is dropped.
  const char* expected = nullptr;
  size_t done = 0;
  bool header_checked = false;
  bool record_checked = false;
  bool dropping = false;  // receiving a payload that is not this collective's: into nowhere

  size_t head() const { return sizeof(FrameHeader) + record_bytes; }
  size_t total() const { return head() + bytes; }
  bool finished() const { return done == total(); }
  // A receiver reads no payload before it has seen the record.
  bool awaits_record() const { return record_bytes > 0 && !record_checked; }

  // The unfinished part of header, record and payload as iovecs (at most three); a dropped
  // payload goes into `sink` piece by piece.
  int pending_iov(iovec* iov, std::vector<char>& sink) {
    int n = 0;
    size_t skip = done;
    auto add = [&](char* data, size_t size) {
      if (skip >= size) {
        skip -= size;
        return;
      }
      iov[n++] = {data + skip, size - skip};
      skip = 0;
    };
    add(reinterpret_cast<char*>(&header), sizeof(FrameHeader));
    add(record, record_bytes);
    if (awaits_record() || bytes == 0) return n;
    if (!dropping) {
      add(payload, bytes);
      return n;
    }
    if (sink.empty()) sink.resize(Channel::kPassBytes);
    const size_t left = total() - std::max(done, head());
    iov[n++] = {sink.data(), std::min(left, sink.size())};
    return n;
  }

  // Called once the header is in: a frame with a record may hold another payload size (its
  // sender runs another collective); then there is nothing to deliver.
  void take_header(uint64_t sequence) {
    check_header(header, peer, record_bytes > 0 ? record_bytes : bytes, sequence,
                 record_bytes == 0);
    header_checked = true;
    if (header.bytes == record_bytes + bytes) return;
    bytes = header.bytes - record_bytes;
    dropping = true;
  }

  // Called once the record is in: a record that differs means the sender runs another
  // collective (the agreement check names it), and its payload is dropped. The same record with
  // another payload size cannot come from a rank that runs the same collective alike.
  void take_record() {
    record_checked = true;
    if (expected == nullptr) {
      dropping = bytes > 0;
      return;
    }
    if (std::memcmp(record, expected, record_bytes) != 0) {
      dropping = true;
    } else if (dropping) {
      throw TransportError(TransportError::Kind::Protocol,
                           "bad frame from rank " + std::to_string(peer) + ": the same " +
                               "collective, but a message of " + std::to_string(bytes) +
                               " bytes (do the ranks use the same settings?)");
    }
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

char* Mesh::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Mesh::abort(const std::string& cause) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (abort_cause_.empty()) abort_cause_ = cause;
  }
  give_up();
  aborted_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(abort_fd_, &one, sizeof(one));
  if (shm_) shm_->own_doorbell().ring();
}

void Mesh::give_up() {
  if (shm_) shm_->give_up();
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
  iovec iov[3];
  for (auto& t : sends) {
    if (t.finished()) continue;
    Link& link = links_[t.peer];
    int count = t.pending_iov(iov, dropped_);
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
    for (;;) {  // once more when a record came: its payload may be in too
      int count = t.pending_iov(iov, dropped_);
      size_t n = channel(t.peer).read(iov, count);
      t.done += n;
      pass.moved |= n > 0;
      if (!t.header_checked && t.done >= sizeof(FrameHeader)) {
        t.take_header(link.received);
        ++link.received;
      }
      if (!t.awaits_record() || t.done < t.head()) break;
      t.take_record();
      if (t.finished()) break;  // nothing follows the record (a socket read of nothing is EOF)
    }
    if (t.finished()) continue;
    pass.pending = true;
    (link.in ? pass.waits_on_shm : pass.waits_on_tcp) = true;
  }
  return pass;
}

std::string Mesh::describe_pending(const std::vector<Transfer>& sends,
                                   const std::vector<Transfer>& recvs) {
  std::ostringstream out;
  // A peer whose record has not come has not entered the collective.
  const char* sep = "";
  for (const auto& t : recvs) {
    if (!t.finished() && t.awaits_record()) out << (*sep ? sep : "rank(s) ") << t.peer, sep = ", ";
  }
  if (*sep) {
    out << " did not join";
    return out.str();
  }
  out << "still ";
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
                    Deadline deadline, Records records) {
  const bool carried = records_.check && records == Records::Carried;
  if (records_.check && !carried) settle_records(deadline);
  sends_.clear();
  recvs_.clear();
  if (!carried) {
    for (const auto& op : send_ops) add_send(op.peer, op.data, op.bytes);
    for (const auto& op : recv_ops) add_recv(op.peer, op.data, op.bytes);
    return run_transfers(deadline);
  }
  // A message to and from every peer, each with its record ahead.
  const size_t record = records_.bytes;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto send = std::find_if(send_ops.begin(), send_ops.end(),
                             [&](const SendOp& op) { return op.peer == peer; });
    auto recv = std::find_if(recv_ops.begin(), recv_ops.end(),
                             [&](const RecvOp& op) { return op.peer == peer; });
    const bool sends = send != send_ops.end(), receives = recv != recv_ops.end();
    add_send(peer, sends ? send->data : nullptr, sends ? send->bytes : 0, records_.mine, record);
    add_recv(peer, receives ? recv->data : nullptr, receives ? recv->bytes : 0,
             records_.theirs + peer * record, record, records_.mine);
  }
  const std::function<void()> check = std::move(records_.check);
  records_ = {};
  run_transfers(deadline);
  check();
}

void Mesh::carry_records(const void* mine, void* theirs, size_t bytes,
                         std::function<void()> check) {
  records_ = {static_cast<const char*>(mine), static_cast<char*>(theirs), bytes,
              std::move(check)};
}

void Mesh::settle_records(Deadline deadline) {
  const PendingRecords records = std::move(records_);
  records_ = {};
  exchange_records(records.mine, records.theirs, records.bytes, deadline);
  records.check();
}

void Mesh::exchange_records(const void* mine, void* theirs, size_t bytes, Deadline deadline) {
  records_ = {};  // this round settles the collective's agreement, or those of an op that failed
  sends_.clear();
  recvs_.clear();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    add_send(peer, nullptr, 0, mine, bytes);
    add_recv(peer, nullptr, 0, static_cast<char*>(theirs) + peer * bytes, bytes);
  }
  run_transfers(deadline);
}

void Mesh::add_send(int peer, const void* data, size_t bytes, const void* record,
                    size_t record_bytes) {
  Link& link = links_.at(peer);
  FrameHeader header{kFrameMagic, 0, link.sent++, record_bytes + bytes};
  Transfer& t = sends_.emplace_back(
      Transfer{peer, static_cast<char*>(const_cast<void*>(data)), bytes, header});
  t.record = static_cast<char*>(const_cast<void*>(record));
  t.record_bytes = record_bytes;
  t.record_checked = true;  // only a receiver checks one
}

void Mesh::add_recv(int peer, void* data, size_t bytes, void* record, size_t record_bytes,
                    const void* expected) {
  Transfer& t = recvs_.emplace_back(Transfer{peer, static_cast<char*>(data), bytes, FrameHeader{}});
  t.record = static_cast<char*>(record);
  t.record_bytes = record_bytes;
  t.expected = static_cast<const char*>(expected);
}

void Mesh::run_transfers(Deadline deadline) {
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
      throw TransportError(TransportError::Kind::Timeout, describe_pending(sends, recvs),
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
