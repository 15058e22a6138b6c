#include "channel.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace occl::transport {

[[noreturn]] void throw_io(int peer, const char* what, int err) {
  throw TransportError(TransportError::Kind::System,
                       std::string(what) + " rank " + std::to_string(peer) + ": " +
                           std::strerror(err));
}

[[noreturn]] void throw_closed(int peer) {
  throw TransportError(TransportError::Kind::PeerClosed,
                       "rank " + std::to_string(peer) + " closed the connection");
}

size_t Channel::write(const iovec* iov, int count) const {
  if (out) {
    size_t moved = 0;
    for (int i = 0; i < count && moved < kPassBytes; ++i) {
      size_t want = std::min(iov[i].iov_len, kPassBytes - moved);
      size_t n = out->write_some(static_cast<const char*>(iov[i].iov_base), want);
      moved += n;
      if (n < want) break;
    }
    return moved;
  }
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = count;
  ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return static_cast<size_t>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == EPIPE || errno == ECONNRESET) throw_closed(peer);
  throw_io(peer, "sending to", errno);
}

size_t Channel::read(const iovec* iov, int count) const {
  if (in) {
    size_t moved = 0;
    for (int i = 0; i < count && moved < kPassBytes; ++i) {
      size_t want = std::min(iov[i].iov_len, kPassBytes - moved);
      size_t n = in->read_some(static_cast<char*>(iov[i].iov_base), want);
      moved += n;
      if (n < want) break;
    }
    return moved;
  }
  ssize_t n = ::readv(fd, iov, count);
  if (n == 0) throw_closed(peer);
  if (n > 0) return static_cast<size_t>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == ECONNRESET) throw_closed(peer);
  throw_io(peer, "receiving from", errno);
}

}  // namespace occl::transport
