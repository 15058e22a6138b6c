// Copying straight from another rank's memory: cross-memory attach (process_vm_readv), one
// kernel copy per byte where a shared-memory ring needs two (into the ring, out of it).
//
// The kernel allows it only with ptrace permission over the peer: the same user, and no Yama or
// seccomp rule against it. connect_shared_memory probes every pair of ranks on a host and turns
// this on only when all of them can (a group never mixes the two, so every rank picks the same
// algorithm). It gives a rank no power it did not have: a process of the same user may already
// ptrace its peers.
//
// A rank only ever reads its peers' memory, never writes it: a rank that was stopped (SIGSTOP, a
// debugger, a swapped-out VM) and resumes after its group gave up on it must not touch the
// buffers the others have moved on to. For the same reason every read goes in pieces, each after
// a look at the group's given-up word, which the first rank to give up on the group sets before
// it goes on: a resumed rank reads at most the piece it was stopped in, into its own memory, then
// fails. (The kernel gives no way to take back another process's access for the same user.)
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace occl::transport {

// Holds a group rank + 1 once that rank gave up on the group (0 until then). It lies in memory
// that every rank of the host maps (ShmLinks), so a rank sees it even while its links are idle.
using GivenUpWord = std::atomic<uint32_t>;

class PeerMemory {
 public:
  // Bytes read between two looks at the given-up word.
  static constexpr size_t kPieceBytes = 1 << 20;

  // pids[r]: the process of group rank r (every rank is on this host); `given_up` must outlive
  // this object and its copies.
  PeerMemory(std::vector<pid_t> pids, const GivenUpWord* given_up)
      : pids_(std::move(pids)), given_up_(given_up) {}
  pid_t pid(int rank) const { return pids_.at(rank); }

  // Copy `bytes` at address `remote` in rank `peer` to `local`. Throw TransportError:
  // PeerClosed when the peer has exited or a rank gave up on the group, System when the kernel
  // refuses.
  void read(int peer, uint64_t remote, void* local, size_t bytes) const;
  // Throws PeerClosed, naming the rank, once a rank gave up on the group.
  void check_not_given_up() const;

  // A few bytes of this process that a peer's probe() reads back, and their address.
  static uint64_t probe_address();
  // Empty when the bytes at `remote` in `pid` are the probe's: this process may read that one.
  // Otherwise why not ("Operation not permitted").
  static std::string probe(pid_t pid, uint64_t remote);

 private:
  std::vector<pid_t> pids_;
  const GivenUpWord* given_up_;
};

}  // namespace occl::transport
