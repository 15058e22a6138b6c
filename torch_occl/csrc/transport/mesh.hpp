// A full mesh of framed TCP connections between the ranks of one group.
//
// Algorithms describe one step of communication as a set of sends and receives and call
// `exchange`, which progresses all of them at once with poll(): a ring step sends to the next
// rank while it receives from the previous one, without threads and without deadlock. Every
// message carries a header (magic, per-link sequence number, size) that the receiver checks
// before it trusts the payload, so a desynchronised peer is an error, never silent corruption.
#pragma once

#include "socket.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace occl::transport {

struct SendOp {
  int peer;
  const void* data;
  size_t bytes;
};

struct RecvOp {
  int peer;
  void* data;
  size_t bytes;  // the receiver states the size it expects; anything else is a protocol error
};

class Mesh {
 public:
  // peers[r] is the connection to rank r (invalid for r == rank).
  Mesh(int rank, int size, std::vector<Socket> peers);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Runs every send and receive to completion, or throws TransportError (timeout, a closed
  // peer, a bad frame, abort). At most one send and one receive per peer per call.
  void exchange(const std::vector<SendOp>& sends, const std::vector<RecvOp>& recvs,
                Deadline deadline);

  // Makes any current and future exchange throw TransportError::Kind::Aborted. Thread-safe.
  void abort();

 private:
  struct Link {
    Socket socket;
    uint64_t sent = 0;      // messages sent on this link
    uint64_t received = 0;  // messages received on this link
  };

  int rank_;
  int size_;
  std::vector<Link> links_;
  std::atomic<bool> aborted_{false};  // checked on every pass, even while bytes keep moving
  int abort_fd_;  // an eventfd that abort() makes readable, so a waiting poll() wakes up
};

}  // namespace occl::transport
