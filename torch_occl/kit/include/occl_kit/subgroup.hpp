// What c10d::Backend::split asks of a generated backend, in the terms its runtime needs: which
// ranks of the group form the subgroup, this rank's place in it, and the subgroup's global ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace occl::kit {

struct Subgroup {
  std::vector<int> members;               // the group's ranks that form it, ascending
  int rank = -1;                          // this rank's in the subgroup; -1 when not a member
  std::vector<uint64_t> global_ranks;     // of the members, in subgroup rank order
  bool includes_me() const { return rank >= 0; }
  int size() const { return static_cast<int>(members.size()); }
};

// The subgroup of `ranks` (ranks of a group of `size` in which this process is `rank`, whose
// global ranks are `global_ranks`, empty for the default group). Raises naming `op` and "ranks"
// when they are empty, out of range or repeated.
Subgroup plan_subgroup(const std::string& op, const std::vector<int>& ranks, int rank, int size,
                       const std::vector<uint64_t>& global_ranks);

}  // namespace occl::kit
