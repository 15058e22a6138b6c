// What c10d::Backend::shrink asks of a generated backend: the survivors, whether to fail the
// group's ops in flight first, and the store they connect through afresh. Nothing of the group's
// runtime carries over (its links may lead to the dead), only its store, which outlives the
// group: torch destroys the group right after the shrink.
#pragma once

#include "occl_kit/subgroup.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace occl::kit {

struct Shrink {
  Subgroup survivors;    // this rank among them
  bool abort_in_flight;  // SHRINK_ABORT
};

// A shrink that excludes `excluded` (ranks of a group of `size` in which this process is `rank`,
// as torch's shrink_group passes them) with torch's `flags`. Raises naming `op` and the argument
// when the ranks are empty, out of range, repeated or name this rank (an excluded rank does not
// call shrink), or the flags are neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1).
Shrink plan_shrink(const std::string& op, const std::vector<int64_t>& excluded, int flags, int rank,
                   int size, const std::vector<uint64_t>& global_ranks);

// The store of the group's `index`-th shrink (counted from 0 on every survivor): `group_store`'s
// keys under a prefix of its own, so no key of the group or of an earlier shrink is seen again.
c10::intrusive_ptr<c10d::Store> shrink_store(const c10::intrusive_ptr<c10d::Store>& group_store,
                                             uint64_t index);

}  // namespace occl::kit
