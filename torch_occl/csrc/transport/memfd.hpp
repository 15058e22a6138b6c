// Memory that processes of one host share: a memfd (anonymous, never named in /dev/shm, mode
// 0600), mapped by its creator and opened by the others through /proc/<pid>/fd/<fd>, which the
// kernel allows a process of the same user. The memory lives until its last mapping goes.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace occl::transport {

struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
};

// A new memfd of `bytes`. Throws TransportError (System).
int create_memfd(size_t bytes);
// Maps `fd`, which must hold exactly `bytes`. Throws TransportError.
Mapping map_memfd(int fd, size_t bytes);
// Maps fd `fd` of process `pid`. Throws TransportError.
Mapping map_peer_memfd(pid_t pid, int fd, size_t bytes);
void unmap(const Mapping& mapping);

}  // namespace occl::transport
