#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

namespace occl::transport {

void throw_system(const std::string& what, int err) {
  throw TransportError(TransportError::Kind::System, what + ": " + std::strerror(err));
}

namespace {

void make_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_system("fcntl(O_NONBLOCK)");
}

// Small collective messages must not wait for Nagle's algorithm.
void configure_stream(int fd) {
  make_nonblocking(fd);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

AddrInfoPtr resolve(const std::string& host, int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    throw TransportError(TransportError::Kind::System,
                         "cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  return AddrInfoPtr(result, &freeaddrinfo);
}

// Waits for `events` on fd; false when the deadline passed first.
bool wait_for(int fd, short events, Deadline deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    int rc = ::poll(&p, 1, millis_until(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw_system("poll");
  }
}

}  // namespace

std::string advertised_host(const std::string& bind_address) {
  if (bind_address != "0.0.0.0" && bind_address != "::") return bind_address;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

int millis_until(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Socket Socket::listen(const std::string& address) {
  auto info = resolve(address, 0, AI_PASSIVE | AI_NUMERICHOST);
  Socket sock(::socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, 0));
  if (!sock.valid()) throw_system("socket");
  if (::bind(sock.fd_, info->ai_addr, info->ai_addrlen) != 0) {
    throw_system("bind to " + address);
  }
  if (::listen(sock.fd_, SOMAXCONN) != 0) throw_system("listen");
  make_nonblocking(sock.fd_);
  return sock;
}

Socket Socket::connect(const std::string& host, int port, Deadline deadline, bool retry_refused) {
  auto info = resolve(host, port, 0);
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    Socket sock(::socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, 0));
    if (!sock.valid()) throw_system("socket");
    configure_stream(sock.fd_);
    int rc = ::connect(sock.fd_, info->ai_addr, info->ai_addrlen);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!wait_for(sock.fd_, POLLOUT, deadline)) break;
      socklen_t len = sizeof(err);
      getsockopt(sock.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) return sock;
    if (err == ECONNREFUSED && !retry_refused) {
      throw TransportError(TransportError::Kind::PeerClosed,
                           "connection to " + host + ":" + std::to_string(port) + " refused");
    }
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN) {
      throw_system("connect to " + host + ":" + std::to_string(port), err);
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  throw TransportError(TransportError::Kind::Timeout,
                       "timed out connecting to " + host + ":" + std::to_string(port));
}

Socket Socket::accept(Deadline deadline) const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket sock(fd);
      configure_stream(fd);
      return sock;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw_system("accept");
    if (!wait_for(fd_, POLLIN, deadline)) return Socket();
  }
}

void Socket::send_all(const void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_for(fd_, POLLOUT, deadline)) {
        throw TransportError(TransportError::Kind::Timeout, "timed out sending");
      }
    } else {
      throw_system("send");
    }
  }
}

void Socket::recv_all(void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      throw TransportError(TransportError::Kind::PeerClosed, "connection closed by peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_for(fd_, POLLIN, deadline)) {
        throw TransportError(TransportError::Kind::Timeout, "timed out receiving");
      }
    } else {
      throw_system("recv");
    }
  }
}

int Socket::port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw_system("getsockname");
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

std::string Socket::peer_name() const {
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof(peer);
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0) {
    getnameinfo(reinterpret_cast<sockaddr*>(&peer), peer_len, host, sizeof(host), port,
                sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
  }
  return std::string(host) + ":" + port;
}

bool Socket::loopback() const {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      local.ss_family != peer.ss_family) {
    return false;
  }
  if (peer.ss_family == AF_INET6) {
    const in6_addr& to = reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr;
    const in6_addr& from = reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&to)) {  // an IPv4 peer of a socket listening on "::"
      return to.s6_addr[12] == 127 || std::memcmp(&to, &from, sizeof(in6_addr)) == 0;
    }
    return IN6_IS_ADDR_LOOPBACK(&to) || std::memcmp(&to, &from, sizeof(in6_addr)) == 0;
  }
  const in_addr_t to = ntohl(reinterpret_cast<sockaddr_in*>(&peer)->sin_addr.s_addr);
  const in_addr_t from = ntohl(reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr);
  return (to >> 24) == 127 || to == from;
}

void Socket::limit_send_buffer(size_t bytes) const {
  // Only a speed-up: a kernel that refuses it leaves a working link.
  int value = static_cast<int>(std::min<size_t>(bytes, 1 << 30));
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value));
}

}  // namespace occl::transport
