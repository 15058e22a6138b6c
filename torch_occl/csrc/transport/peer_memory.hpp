// Copying straight from and into another rank's memory: cross-memory attach
// (process_vm_readv / process_vm_writev), one kernel copy per byte where a shared-memory ring
// needs two (into the ring, out of it).
//
// The kernel allows it only with ptrace permission over the peer: the same user, and no Yama or
// seccomp rule against it. connect_shared_memory probes every pair of ranks on a host and turns
// this on only when all of them can (a group never mixes the two, so every rank picks the same
// algorithm). It gives a rank no power it did not have: a process of the same user may already
// ptrace its peers.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace occl::transport {

class PeerMemory {
 public:
  // pids[r]: the process of group rank r (every rank is on this host).
  explicit PeerMemory(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  pid_t pid(int rank) const { return pids_.at(rank); }

  // Copy `bytes` at address `remote` in rank `peer` to `local`, or the other way. Throw
  // TransportError: PeerClosed when the peer has exited, System when the kernel refuses.
  void read(int peer, uint64_t remote, void* local, size_t bytes) const;
  void write(int peer, uint64_t remote, const void* local, size_t bytes) const;

  // A few bytes of this process that a peer's probe() reads back, and their address.
  static uint64_t probe_address();
  // Empty when the bytes at `remote` in `pid` are the probe's: this process may read that one.
  // Otherwise why not ("Operation not permitted").
  static std::string probe(pid_t pid, uint64_t remote);

 private:
  std::vector<pid_t> pids_;
};

}  // namespace occl::transport
