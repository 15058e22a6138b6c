#include "mesh.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace occl::transport {
namespace {

constexpr uint32_t kFrameMagic = 0x4f43434c;  // "OCCL"

struct FrameHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t sequence;  // this message's index on its link
  uint64_t bytes;     // payload size
};

// One direction of one message in flight: header then payload, `done` bytes of both so far.
struct Transfer {
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

[[noreturn]] void throw_io(int peer, const char* what, int err) {
  throw TransportError(TransportError::Kind::System,
                       std::string(what) + " rank " + std::to_string(peer) + ": " +
                           std::strerror(err));
}

// One non-blocking attempt; true when bytes moved.
bool progress_send(int fd, Transfer& t) {
  iovec iov[2];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = t.pending_iov(iov);
  ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) {
    t.done += static_cast<size_t>(n);
    return n > 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
  if (errno == EPIPE || errno == ECONNRESET) {
    throw TransportError(TransportError::Kind::PeerClosed,
                         "rank " + std::to_string(t.peer) + " closed the connection");
  }
  throw_io(t.peer, "sending to", errno);
}

// `next_sequence` is the link's count of received messages; a valid header advances it.
bool progress_recv(int fd, Transfer& t, uint64_t& next_sequence) {
  iovec iov[2];
  ssize_t n = ::readv(fd, iov, t.pending_iov(iov));
  if (n == 0) {
    throw TransportError(TransportError::Kind::PeerClosed,
                         "rank " + std::to_string(t.peer) + " closed the connection");
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    if (errno == ECONNRESET) {
      throw TransportError(TransportError::Kind::PeerClosed,
                           "rank " + std::to_string(t.peer) + " reset the connection");
    }
    throw_io(t.peer, "receiving from", errno);
  }
  t.done += static_cast<size_t>(n);
  if (!t.header_checked && t.done >= sizeof(FrameHeader)) {
    const FrameHeader& h = t.header;
    if (h.magic != kFrameMagic || h.sequence != next_sequence || h.bytes != t.bytes) {
      std::ostringstream msg;
      msg << "bad frame from rank " << t.peer << ": expected message #" << next_sequence
          << " of " << t.bytes << " bytes, got ";
      if (h.magic != kFrameMagic) {
        msg << "a frame with a wrong magic number";
      } else {
        msg << "message #" << h.sequence << " of " << h.bytes << " bytes";
      }
      msg << " (do the ranks call the same collectives with the same sizes?)";
      throw TransportError(TransportError::Kind::Protocol, msg.str());
    }
    t.header_checked = true;
    ++next_sequence;
  }
  return true;
}

std::string describe_pending(const std::vector<Transfer>& sends,
                             const std::vector<Transfer>& recvs) {
  std::ostringstream out;
  const char* sep = "";
  for (const auto& t : sends) {
    if (!t.finished()) out << sep << "sending to rank " << t.peer, sep = ", ";
  }
  for (const auto& t : recvs) {
    if (!t.finished()) out << sep << "receiving from rank " << t.peer, sep = ", ";
  }
  return out.str();
}

}  // namespace

Mesh::Mesh(int rank, int size, std::vector<Socket> peers)
    : rank_(rank), size_(size), links_(static_cast<size_t>(size)) {
  for (int r = 0; r < size; ++r) links_[r].socket = std::move(peers[r]);
  abort_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (abort_fd_ < 0) throw_io(rank, "eventfd for", errno);
}

Mesh::~Mesh() { ::close(abort_fd_); }

void Mesh::abort() {
  aborted_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(abort_fd_, &one, sizeof(one));
}

void Mesh::exchange(const std::vector<SendOp>& send_ops, const std::vector<RecvOp>& recv_ops,
                    Deadline deadline) {
  std::vector<Transfer> sends;
  std::vector<Transfer> recvs;
  sends.reserve(send_ops.size());
  recvs.reserve(recv_ops.size());
  for (const auto& op : send_ops) {
    Link& link = links_.at(op.peer);
    FrameHeader header{kFrameMagic, 0, link.sent++, op.bytes};
    sends.push_back(Transfer{op.peer, static_cast<char*>(const_cast<void*>(op.data)), op.bytes,
                             header});
  }
  for (const auto& op : recv_ops) {
    recvs.push_back(Transfer{op.peer, static_cast<char*>(op.data), op.bytes, FrameHeader{}});
  }

  std::vector<pollfd> fds;
  for (;;) {
    if (aborted_) throw TransportError(TransportError::Kind::Aborted, "the communicator was aborted");
    bool pending = false;
    bool moved = false;
    fds.clear();
    fds.push_back({abort_fd_, POLLIN, 0});
    for (auto& t : sends) {
      if (!t.finished()) moved |= progress_send(links_[t.peer].socket.fd(), t);
      if (!t.finished()) {
        pending = true;
        fds.push_back({links_[t.peer].socket.fd(), POLLOUT, 0});
      }
    }
    for (auto& t : recvs) {
      Link& link = links_[t.peer];
      if (!t.finished()) moved |= progress_recv(link.socket.fd(), t, link.received);
      if (!t.finished()) {
        pending = true;
        fds.push_back({link.socket.fd(), POLLIN, 0});
      }
    }
    if (!pending) return;
    if (moved) continue;  // try again before sleeping: the kernel may take more right away

    int rc = ::poll(fds.data(), fds.size(), millis_until(deadline));
    if (rc < 0 && errno != EINTR) throw_io(rank_, "poll on", errno);
    if (rc == 0 && millis_until(deadline) == 0) {
      throw TransportError(TransportError::Kind::Timeout,
                           "still " + describe_pending(sends, recvs));
    }
  }
}

}  // namespace occl::transport
