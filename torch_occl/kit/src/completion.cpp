#include "occl_kit/completion.hpp"

#include "occl_kit/errors.hpp"

#include <c10/util/Logging.h>

#include <algorithm>

namespace occl::kit {
namespace {

// A busy engine yields between passes; after this many passes with nothing finished it sleeps,
// longer and longer up to kLongestSleep: a slow request costs little, a quick one is seen soon.
constexpr int kPassesBeforeSleep = 64;
constexpr int64_t kLongestSleepUs = 1000;

std::exception_ptr aborted() {
  return std::make_exception_ptr(
      LinkError(LinkError::Kind::Aborted, "the communicator was aborted"));
}

template <class Request>
void finish_logged(const Request& request, std::exception_ptr error, int source) {
  try {
    request.finish(error, source);
  } catch (const std::exception& e) {
    LOG(ERROR) << "occl_kit: a completion threw: " << e.what();
  }
}

}  // namespace

CompletionEngine::~CompletionEngine() { abort(); }

void CompletionEngine::watch(TestFn test, std::chrono::steady_clock::time_point deadline,
                             FinishFn finish) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->stopping) {
      state_->pending.push_back({std::move(test), deadline, std::move(finish)});
      if (!thread_.joinable()) thread_ = std::thread(loop, state_);
      state_->arrived.notify_one();
      return;
    }
  }
  finish(aborted(), -1);
}

void CompletionEngine::abort() {
  std::deque<Pending> failed;
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    failed.swap(state_->pending);
    thread.swap(thread_);
  }
  state_->arrived.notify_all();
  if (thread.joinable()) {
    // Aborted from a completion, on the thread itself: it sees `stopping` when that returns.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
  for (const auto& request : failed) finish_logged(request, aborted(), -1);
}

void CompletionEngine::loop(std::shared_ptr<State> state) {
  int idle_passes = 0;
  std::unique_lock<std::mutex> lock(state->mutex);
  while (true) {
    state->arrived.wait(lock, [&] { return state->stopping || !state->pending.empty(); });
    std::deque<Pending> batch;
    batch.swap(state->pending);
    if (state->stopping) {
      lock.unlock();
      for (const auto& request : batch) finish_logged(request, aborted(), -1);
      return;
    }
    lock.unlock();
    bool progressed = false;
    std::deque<Pending> still;
    for (auto& request : batch) {
      Poll poll;
      std::exception_ptr error;
      try {
        poll = request.test();
      } catch (...) {
        error = std::current_exception();
      }
      if (!error && !poll.done && std::chrono::steady_clock::now() >= request.deadline) {
        error = std::make_exception_ptr(
            LinkError(LinkError::Kind::Timeout, "its request did not complete in time"));
      }
      if (error || poll.done) {
        finish_logged(request, error, poll.source_rank);
        progressed = true;
      } else {
        still.push_back(std::move(request));
      }
    }
    idle_passes = progressed ? 0 : idle_passes + 1;
    if (idle_passes < kPassesBeforeSleep) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::min<int64_t>(kLongestSleepUs, 10 * (idle_passes - kPassesBeforeSleep + 1))));
    }
    lock.lock();
    // Requests that came meanwhile go after those still pending: tested in arrival order.
    for (auto& request : state->pending) still.push_back(std::move(request));
    state->pending.swap(still);
  }
}

}  // namespace occl::kit
