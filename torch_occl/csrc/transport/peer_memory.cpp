#include "peer_memory.hpp"

#include "socket.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace occl::transport {
namespace {

constexpr char kProbe[16] = "occl peer probe";

}  // namespace

// process_vm_readv may move fewer bytes than asked (the kernel stops at a fault or after a
// partial page run): loop until all are moved.
void PeerMemory::read(int peer, uint64_t remote, void* local, size_t bytes) const {
  const pid_t pid = pids_.at(peer);
  char* into = static_cast<char*>(local);
  while (bytes > 0) {
    check_not_given_up();
    iovec mine{into, std::min(bytes, kPieceBytes)};
    iovec theirs{reinterpret_cast<void*>(remote), mine.iov_len};
    ssize_t n = ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (n <= 0) {
      int err = n < 0 ? errno : EFAULT;
      if (err == EINTR) continue;
      if (err == ESRCH) {
        throw TransportError(TransportError::Kind::PeerClosed,
                             "rank " + std::to_string(peer) +
                                 " closed the connection (its process is gone)");
      }
      throw_system("reading the memory of rank " + std::to_string(peer) + " (pid " +
                       std::to_string(pid) + ")",
                   err);
    }
    into += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void PeerMemory::check_not_given_up() const {
  const uint32_t by = given_up_->load(std::memory_order_acquire);
  if (by == 0) return;
  throw TransportError(TransportError::Kind::PeerClosed,
                       "rank " + std::to_string(by - 1) +
                           " gave up on the group (an op failed, or it was aborted or shut down)",
                       {static_cast<int>(by) - 1});
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
