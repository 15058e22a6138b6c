#include "occl_kit/work.hpp"

#include "occl_kit/flight_recorder.hpp"

#include <ATen/core/jit_type.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <optional>

namespace occl::kit {

// Without a profiler, c10d::Work gets no title: it would allocate a record of nothing and copy the
// outputs for it, on every op.
Work::Work(int rank, c10d::OpType op_type, const char* profiling_title, bool profiled,
           std::vector<at::Tensor> outputs, uint64_t sequence, bool timed)
    : c10d::Work(rank, op_type, profiled ? profiling_title : nullptr,
                 profiled ? std::optional<std::vector<at::Tensor>>(outputs) : std::nullopt),
      outputs_(std::move(outputs)),
      profiling_title_(profiling_title),
      sequence_(sequence),
      timed_(timed) {}

c10::intrusive_ptr<Work> Work::all_of(int rank, const char* profiling_title,
                                      std::vector<c10::intrusive_ptr<Work>> works) {
  std::vector<at::Tensor> outputs;
  for (const auto& work : works) {
    outputs.insert(outputs.end(), work->outputs_.begin(), work->outputs_.end());
  }
  auto group = c10::make_intrusive<Work>(rank, c10d::OpType::COALESCED, profiling_title,
                                         at::hasCallbacks(), outputs);
  if (works.empty()) {
    group->complete(nullptr, -1);
    return group;
  }
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::exception_ptr first_error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works.size();
  for (const auto& work : works) {
    // One runtime's ops: any one's progress moves them all.
    if (!group->progress_) {
      group->progress_ = work->progress_;
      group->wait_without_progress_ = work->wait_without_progress_;
    }
    work->future()->addCallback([group, pending](c10::ivalue::Future& future) {
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (future.hasError() && !pending->first_error) pending->first_error = future.exception_ptr();
        if (--pending->left > 0) return;
        error = pending->first_error;
      }
      group->complete(error, -1);
    });
  }
  return group;
}

c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() {
  waited_without_progress();
  return future();
}

c10::intrusive_ptr<c10::ivalue::Future> Work::future() {
  ticket_.wake_worker();
  std::lock_guard<std::mutex> lock(future_mutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    if (done_) mark(*future_, error_);
  }
  return future_;
}

void Work::mark(c10::ivalue::Future& future, const std::exception_ptr& error) const {
  if (error) {
    future.setError(error);
  } else {
    future.markCompleted(c10::IValue(outputs_));
  }
}

bool Work::isCompleted() {
  ticket_.wake_worker();
  if (c10d::Work::isCompleted()) return true;
  waited_without_progress();
  return c10d::Work::isCompleted();
}

void Work::waited_without_progress() {
  if (wait_without_progress_) wait_without_progress_();
}

std::vector<at::Tensor> Work::result() { return outputs_; }

int Work::sourceRank() const { return source_rank_; }

bool Work::wait(std::chrono::milliseconds timeout) {
  if (progress_) progress_([this] { return c10d::Work::isCompleted(); });
  if (timeout != ::kNoTimeout || !ticket_.run_here()) ticket_.wake_worker();
  return c10d::Work::wait(timeout);
}

float Work::getDuration() const {
  TORCH_CHECK(timed_, profiling_title_, " #", sequence_, ": no duration, the op was issued before"
              " enableCollectivesTiming (pg._enable_collectives_timing())");
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, profiling_title_, " #", sequence_, ": no duration before it completes");
  return std::chrono::duration<float, std::milli>(finished_ - started_).count();
}

uint64_t Work::getSequencenumber() const { return sequence_; }

void Work::started() {
  if (timed_) started_ = std::chrono::steady_clock::now();
  FlightRecorder::get().started(record_);
}

void Work::failed() { FlightRecorder::get().finished(record_, false); }

std::shared_ptr<c10d::WorkInfo> Work::info() const {
  return std::make_shared<c10d::WorkInfo>(retrieveOpType(), sequence_, started_, finished_,
                                          finished_ - started_);
}

void Work::complete(std::exception_ptr error, int source_rank) {
  if (timed_) finished_ = std::chrono::steady_clock::now();
  FlightRecorder::get().finished(record_, !error);
  source_rank_ = source_rank;
  c10::intrusive_ptr<c10::ivalue::Future> future;  // marked here if asked for before this
  {
    std::lock_guard<std::mutex> lock(future_mutex_);
    done_ = true;
    error_ = error;
    future = future_;
  }
  if (future) mark(*future, error);
  finish(error);
}

}  // namespace occl::kit
