#include "occl_kit/subgroup.hpp"

#include <c10/util/Exception.h>

#include <algorithm>

namespace occl::kit {

Subgroup plan_subgroup(const std::string& op, const std::vector<int>& ranks, int rank, int size,
                       const std::vector<uint64_t>& global_ranks) {
  TORCH_CHECK(!ranks.empty(), op, ": ranks must name at least one rank of the group");
  Subgroup subgroup;
  subgroup.members = ranks;
  std::sort(subgroup.members.begin(), subgroup.members.end());
  for (size_t i = 0; i < subgroup.members.size(); ++i) {
    const int member = subgroup.members[i];
    TORCH_CHECK(member >= 0 && member < size, op, ": ranks must be ranks of the group, in [0, ",
                size, "), got ", member);
    TORCH_CHECK(i == 0 || subgroup.members[i - 1] != member, op,
                ": ranks must not repeat a rank, got ", member, " twice");
    if (member == rank) subgroup.rank = static_cast<int>(i);
    subgroup.global_ranks.push_back(global_ranks.empty() ? static_cast<uint64_t>(member)
                                                         : global_ranks.at(member));
  }
  return subgroup;
}

}  // namespace occl::kit
