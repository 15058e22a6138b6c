// What every op of a kit-built backend returns.
#pragma once

#include "occl_kit/executor.hpp"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace occl::kit {

class Engine;

// A posted op's runtime may let the thread about to wait for the op move it (OpContext): called
// with a test of whether the op is done, it works on this thread until the test passes or for as
// long as it cares to spin, then returns; wait() then sleeps until the op completes. The other
// ways to wait (isCompleted, getFuture) tell the runtime instead (OpContext::wait_without_progress).
using WaiterProgress = std::function<void(const std::function<bool()>& done)>;

// Its future holds the op's output tensors (as gloo's does), so DDP comm hooks can read them. A
// blocking op (asyncOp false) issued while its group is idle has run before its Work is returned.
// Any other op the group's worker was not woken for (asyncOp false, or a small asynchronous op: see
// Runtime::deferred_async_max_bytes) is run by wait() on the caller's thread, with the ops queued
// before it, when no other thread runs one; the other ways to wait for it (getFuture,
// isCompleted, a wait with a timeout) wake the group's worker for it first.
class Work : public c10d::Work {
 public:
  // `profiled`: a profiler listens (at::hasCallbacks()), and records the Work's lifetime under
  // `profiling_title`; `sequence`: the op's number among its group's collectives (or
  // point-to-point ops); `timed`: it records when it ran (getDuration, completion hooks).
  Work(int rank, c10d::OpType op_type, const char* profiling_title, bool profiled,
       std::vector<at::Tensor> outputs, uint64_t sequence = 0, bool timed = false);

  // A Work that completes when all of `works` have, failing with the first failure among them.
  static c10::intrusive_ptr<Work> all_of(int rank, const char* profiling_title,
                                         std::vector<c10::intrusive_ptr<Work>> works);

  // Made when first asked for (most callers never ask): completed, if the op is.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  // The sender's rank, for a receive from any source.
  int sourceRank() const override;
  // Waiting with no timeout of its own runs the op, with the ops queued before it, on this
  // thread when no other thread runs one (the op keeps its own timeout), saving two thread
  // hand-offs. A posted op whose runtime gave a WaiterProgress is first moved by it.
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;

  // Milliseconds from the op's start to its end; the op must have been issued with timing on
  // (enableCollectivesTiming), and be complete.
  float getDuration() const override;
  uint64_t getSequencenumber() const override;

  // Called by the engine when the op starts running (timed Works note the time).
  void started();
  // Called by the engine when the op failed, before it completes the Work with the error.
  void failed();
  // Called once, by the engine: completes the future, then the Work.
  void complete(std::exception_ptr error, int source_rank);
  // Whether it records when it ran; then, once complete, its type, sequence number, start, end
  // and duration, for completion hooks.
  bool timed() const { return timed_; }
  std::shared_ptr<c10d::WorkInfo> info() const;

 private:
  friend class Engine;
  Executor::Ticket ticket_;  // set once by the engine, before the Work is returned
  WaiterProgress progress_;  // likewise, for a posted op whose runtime gave one
  std::function<void()> wait_without_progress_;  // likewise (OpContext)
  // Tells the runtime that a thread waits without moving the op (OpContext).
  void waited_without_progress();
  // getFuture() without that telling: all_of watches its members' futures, not a thread.
  c10::intrusive_ptr<c10::ivalue::Future> future();
  int64_t record_ = -1;      // in the flight recorder (flight_recorder.hpp), if recorded
  // Completes `future` as the op did.
  void mark(c10::ivalue::Future& future, const std::exception_ptr& error) const;

  std::vector<at::Tensor> outputs_;
  std::mutex future_mutex_;  // guards the three below
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool done_ = false;
  std::exception_ptr error_;
  int source_rank_ = -1;
  const char* profiling_title_;
  const uint64_t sequence_;
  const bool timed_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point finished_;
};

// The tensors of `lists`, in order: what a Work's future holds for an op with list outputs.
inline std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

}  // namespace occl::kit
