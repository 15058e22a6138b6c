#include "peer_memory.hpp"

#include "socket.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace occl::transport {
namespace {

constexpr char kProbe[16] = "occl peer probe";

// process_vm_readv/writev may move fewer bytes than asked (the kernel stops at a fault or after
// a partial page run): loop until all are moved.
template <typename Syscall>
void copy_all(Syscall syscall, int peer, pid_t pid, uint64_t remote, char* local, size_t bytes,
              const char* direction) {
  while (bytes > 0) {
    iovec mine{local, bytes};
    iovec theirs{reinterpret_cast<void*>(remote), bytes};
    ssize_t n = syscall(pid, &mine, 1, &theirs, 1, 0);
    if (n <= 0) {
      int err = n < 0 ? errno : EFAULT;
      if (err == EINTR) continue;
      if (err == ESRCH) {
        throw TransportError(TransportError::Kind::PeerClosed,
                             "rank " + std::to_string(peer) +
                                 " closed the connection (its process is gone)");
      }
      throw_system(std::string(direction) + " the memory of rank " + std::to_string(peer) +
                       " (pid " + std::to_string(pid) + ")",
                   err);
    }
    local += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace

void PeerMemory::read(int peer, uint64_t remote, void* local, size_t bytes) const {
  copy_all(::process_vm_readv, peer, pids_.at(peer), remote, static_cast<char*>(local), bytes,
           "reading");
}

void PeerMemory::write(int peer, uint64_t remote, const void* local, size_t bytes) const {
  // process_vm_writev takes the local side as a non-const iovec; it only reads it.
  copy_all(::process_vm_writev, peer, pids_.at(peer), remote,
           const_cast<char*>(static_cast<const char*>(local)), bytes, "writing");
}

uint64_t PeerMemory::probe_address() { return reinterpret_cast<uint64_t>(kProbe); }

std::string PeerMemory::probe(pid_t pid, uint64_t remote) {
  char seen[sizeof(kProbe)] = {};
  iovec mine{seen, sizeof(seen)};
  iovec theirs{reinterpret_cast<void*>(remote), sizeof(seen)};
  ssize_t n = ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
  if (n < 0) return std::strerror(errno);
  if (n != static_cast<ssize_t>(sizeof(seen))) {
    return "the probe read only " + std::to_string(n) + " bytes";
  }
  return std::memcmp(seen, kProbe, sizeof(kProbe)) == 0 ? "" : "probe read back other bytes";
}

}  // namespace occl::transport
