#include "channel.hpp"

#include <sys/socket.h>

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
  if (out) return out->write_some(iov, count, kPassBytes);
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
  if (in) return in->read_some(iov, count, kPassBytes);
  ssize_t n = ::readv(fd, iov, count);
  if (n == 0) throw_closed(peer);
  if (n > 0) return static_cast<size_t>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == ECONNRESET) throw_closed(peer);
  throw_io(peer, "receiving from", errno);
}

}  // namespace occl::transport
