#include "occl_kit/shrink.hpp"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

namespace occl::kit {
namespace {

// torch.distributed's SHRINK_DEFAULT and SHRINK_ABORT.
constexpr int kShrinkDefault = 0;
constexpr int kShrinkAbort = 1;

}  // namespace

Shrink plan_shrink(const std::string& op, const std::vector<int64_t>& excluded, int flags, int rank,
                   int size, const std::vector<uint64_t>& global_ranks) {
  TORCH_CHECK(flags == kShrinkDefault || flags == kShrinkAbort, op,
              ": shrink_flags must be SHRINK_DEFAULT (0) or SHRINK_ABORT (1), got ", flags);
  TORCH_CHECK(!excluded.empty(), op, ": ranks_to_exclude must name at least one rank");
  std::vector<bool> out(size, false);
  for (const int64_t r : excluded) {
    TORCH_CHECK(r >= 0 && r < size, op, ": ranks_to_exclude must be ranks of the group, in [0, ",
                size, "), got ", r);
    TORCH_CHECK(!out[r], op, ": ranks_to_exclude must not repeat a rank, got ", r, " twice");
    TORCH_CHECK(r != rank, op, ": ranks_to_exclude names this rank (", rank,
                "): only the ranks that remain call shrink");
    out[r] = true;
  }
  std::vector<int> survivors;
  for (int r = 0; r < size; ++r) {
    if (!out[r]) survivors.push_back(r);
  }
  return {plan_subgroup(op, survivors, rank, size, global_ranks), flags == kShrinkAbort};
}

c10::intrusive_ptr<c10d::Store> shrink_store(const c10::intrusive_ptr<c10d::Store>& group_store,
                                             uint64_t index) {
  return c10::make_intrusive<c10d::PrefixStore>("shrink/" + std::to_string(index), group_store);
}

}  // namespace occl::kit
