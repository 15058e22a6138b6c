// What torch's tools read about a group's ops besides their results: the completion hook
// (pg._register_on_completion_hook), the profiler's collective metadata (record_param_comms), and
// the debug log a user turns on with <BACKEND>_DEBUG (occl: OCCL_DEBUG).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace occl::kit {

// <BACKEND>_DEBUG=INFO logs each group's choices once (the runtime's), TRACE also every op;
// anything else, or nothing, logs nothing. Read once per backend and process.
enum class DebugLevel { Off = 0, Info = 1, Trace = 2 };
DebugLevel debug_level(const std::string& backend);
// One line on stderr: "<backend> INFO <where>: <message>".
void debug_log(const std::string& backend, DebugLevel level, const std::string& where,
               const std::string& message);

// The hook torch registers (registerOnCompletionHook): called with every op's WorkInfo, in the
// order the ops completed, on a thread of its own, which holds no lock of the kit's or the
// runtime's while the hook runs; a hook that throws is logged, never fatal. The thread starts
// with the hook and is never joined (the hook may wait for a GIL the destroying thread holds);
// the hook itself is never destroyed (a Python one would need the GIL while the interpreter
// exits).
class CompletionHook {
 public:
  using Fn = std::function<void(std::shared_ptr<c10d::WorkInfo>)>;
  CompletionHook() = default;
  ~CompletionHook();  // stops the thread once it has called the hook for what was posted
  CompletionHook(const CompletionHook&) = delete;
  CompletionHook& operator=(const CompletionHook&) = delete;

  // Throws if one is set already (torch allows one per group).
  void set(Fn hook, const std::string& backend);
  bool is_set() const { return set_; }
  // Queues `info` for the hook (nothing without one).
  void post(std::shared_ptr<c10d::WorkInfo> info);

 private:
  struct State;
  std::mutex mutex_;
  std::shared_ptr<State> state_;
  std::atomic<bool> set_{false};
};

// torch's "group ranks" as the profiler records them: the first global rank and the stride
// between them, (0, 1) for the default group, (-1, -1) when they are not evenly spaced.
std::tuple<int, int> global_rank_start_and_stride(const std::vector<uint64_t>& global_ranks);

}  // namespace occl::kit
