// For libraries whose communicator is created by a call that blocks until every member makes it
// (MPI_Comm_create_group, a CCL's init): the store tells first who has arrived.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace occl::kit {

// Sets this rank's key in the group's store (torch prefixes it per group) and returns once every
// rank of the group has set its own, so the blocking call that comes next waits for no rank that
// never comes. Otherwise throws "<what>: rank(s) 2 3 did not join within <timeout> ms".
void wait_for_members(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& what);

}  // namespace occl::kit
