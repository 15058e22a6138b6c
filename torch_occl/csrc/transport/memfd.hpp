// Memory that processes of one host share: a memfd (anonymous, never named in /dev/shm, mode
// 0600), mapped by its creator and opened by the others through /proc/<pid>/fd/<fd>, which the
// kernel allows a process of the same user. The memory lives until its last mapping goes.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace occl::transport {

struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
};

// How a process maps a memfd: a peer's tensors are only ever read here (so that a rank its group
// gave up on cannot write into them, see peer_memory.hpp); rings are written by both ends.
enum class Access { ReadWrite, ReadOnly };

// A new memfd of `bytes`. Throws TransportError (System).
int create_memfd(size_t bytes);
// Maps `fd`, which must hold exactly `bytes`. Throws TransportError.
Mapping map_memfd(int fd, size_t bytes, Access access = Access::ReadWrite);
// Maps fd `fd` of process `pid`. Throws TransportError.
Mapping map_peer_memfd(pid_t pid, int fd, size_t bytes, Access access);
void unmap(const Mapping& mapping);

// Ranks with equal identities can map each other's memfds through /proc/<pid>/fd: same kernel
// boot, same user, same pid namespace (the path names a pid), and same network namespace (so
// that ranks in separate network namespaces, "hosts" to the user, really talk over the network).
// OCCL_HOST_ID splits further: ranks with different values never share memory.
std::string host_identity();

}  // namespace occl::transport
