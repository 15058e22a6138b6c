// The timer DDP's reducer creates for its parameters' device type, to time forward, backward
// compute and communication for DDP's logging data (avg_forward_compute_time, ...). Without one,
// DDP warns "Time stats are currently only collected for CPU and CUDA devices" and reports none.
// occldev's kernels have finished when they return, so host time is device time, as for the CPU.
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace occl_device {
namespace {

using c10d::RegistererTimerRegistry;
using c10d::TimerRegistry;

class HostTimer final : public c10d::Timer {
 public:
  explicit HostTimer(c10::Device /*device*/) {}

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const auto start_time = getTimestamp(start);
    const auto end_time = getTimestamp(end);
    // An end left over from an earlier iteration (backward not run this one) measures nothing.
    if (!start_time || !end_time || *end_time < *start_time) {
      return std::nullopt;
    }
    return *end_time - *start_time;
  }
};

C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, HostTimer)

} // namespace
} // namespace occl_device
