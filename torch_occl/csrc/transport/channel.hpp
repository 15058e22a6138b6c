// One link's byte stream, whichever way it travels: a pair of shared-memory rings to a rank on
// this host (shm.hpp), else a TCP socket. The mesh (collectives) and the p2p engine move their
// frames through it alike; neither writes its own socket or ring I/O.
#pragma once

#include "shm.hpp"

#include <sys/uio.h>

#include <cstddef>

namespace occl::transport {

struct Channel {
  int peer = -1;
  int fd = -1;               // the socket: carries the bytes, or only signals, beside rings
  ByteRing* out = nullptr;   // set (both) when the bytes travel through shared memory
  ByteRing* in = nullptr;

  bool shared() const { return out != nullptr; }
  // Bytes moved from or into up to `count` iovecs: 0 when none can move now. Through rings, at
  // most kPassBytes per call, so that a caller alternating between its transfers moves all of
  // them at once. Throws TransportError (PeerClosed, System) when the socket closed or failed.
  size_t write(const iovec* iov, int count) const;
  size_t read(const iovec* iov, int count) const;

  static constexpr size_t kPassBytes = 64 * 1024;
};

// A closed or reset connection (or a killed process): the same to the user.
[[noreturn]] void throw_closed(int peer);
[[noreturn]] void throw_io(int peer, const char* what, int err);

}  // namespace occl::transport
