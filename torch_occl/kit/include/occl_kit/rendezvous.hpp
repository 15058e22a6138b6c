// Meetings of a group's ranks in its store, which tell who has arrived: before a blocking call
// that creates a communicator (MPI_Comm_create_group, a CCL's init), and torch's
// monitoredBarrier.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace occl::kit {

// Sets this rank's key in the group's store (torch prefixes it per group) and returns once every
// rank of the group has set its own, so the blocking call that comes next waits for no rank that
// never comes. Otherwise throws "<what>: rank(s) 2 3 did not join within <timeout> ms".
void wait_for_members(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& what);

// torch's monitoredBarrier: every rank but 0 reports its arrival and waits for rank 0's word;
// rank 0 waits for the reports until `timeout`, then answers. Where ranks are missing, rank 0
// raises naming them (the first one missing, or with `wait_all_ranks` all of them): "<what>:
// ranks 1, 2 failed to pass monitoredBarrier in 2000 ms", and so do the others, with rank 0's
// words. `index` tells a group's barriers apart: the same on every rank (each calls them in
// order).
void monitored_barrier(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, bool wait_all_ranks, uint64_t index,
                       const std::string& what);

}  // namespace occl::kit
