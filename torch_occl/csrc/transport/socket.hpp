// A TCP socket that never blocks without a deadline.
//
// Every socket is non-blocking; waits go through poll() bounded by a Deadline, so no operation in
// occl can hang past its timeout.
#pragma once

#include "occl_kit/errors.hpp"

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace occl::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The host other ranks connect to for a listener bound to `bind_address`: the address itself,
// or this host's name for a wildcard.
std::string advertised_host(const std::string& bind_address);

// Milliseconds left until `deadline` (0 when it has passed), as poll() wants them.
int millis_until(Deadline deadline);

// Transport failures are the kit's link failures: after one, the engine fails the group's later
// ops at once. `kind` lets the runtime word its message (and lets tests tell them apart).
using TransportError = kit::LinkError;

// Throws TransportError(System) "<what>: <strerror(err)>".
[[noreturn]] void throw_system(const std::string& what, int err = errno);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // Listens on `address` (IPv4 or IPv6 literal) at an ephemeral port.
  static Socket listen(const std::string& address);
  // Connects to host:port, retrying refused connections until `deadline` (or, without
  // `retry_refused`, throwing TransportError(PeerClosed) at the first refusal).
  static Socket connect(const std::string& host, int port, Deadline deadline,
                        bool retry_refused = true);

  // Accepts one connection, or returns an invalid Socket when `deadline` passes.
  Socket accept(Deadline deadline) const;
  // Blocking-style helpers for the handshake: all bytes or a TransportError.
  void send_all(const void* data, size_t bytes, Deadline deadline) const;
  void recv_all(void* data, size_t bytes, Deadline deadline) const;

  int port() const;  // the local port
  std::string peer_name() const;  // "host:port" of the other end, for messages
  // Whether the peer is on this host: it has a loopback address, or this end's own address.
  bool loopback() const;
  // Caps the bytes queued for sending (SO_SNDBUF, which the kernel doubles and limits to
  // net.core.wmem_max), which also stops the kernel from growing it. Best effort.
  void limit_send_buffer(size_t bytes) const;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

}  // namespace occl::transport
