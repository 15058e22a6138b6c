#include "occl_kit/completion.hpp"

#include "occl_kit/errors.hpp"

#include <c10/util/Logging.h>

#include <algorithm>

namespace occl::kit {
namespace {

// Passes a Backoff yields for before it sleeps, and its longest sleep.
constexpr int kPassesBeforeSleep = 64;
constexpr int64_t kLongestSleepUs = 1000;

std::exception_ptr aborted() {
  return std::make_exception_ptr(
      LinkError(LinkError::Kind::Aborted, "the communicator was aborted"));
}

template <class Requests>
void fail_all(Requests& requests) {
  for (const auto& request : requests) {
    try {
      request.finish(aborted(), -1);
    } catch (const std::exception& e) {
      LOG(ERROR) << "occl_kit: a completion threw: " << e.what();
    }
  }
  requests.clear();
}

}  // namespace

void Backoff::pause() {
  ++idle_passes_;
  if (idle_passes_ < kPassesBeforeSleep) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::min<int64_t>(kLongestSleepUs, 10 * (idle_passes_ - kPassesBeforeSleep + 1))));
  }
}

bool poll_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) {
  Backoff backoff;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    backoff.pause();
  }
  return true;
}

CompletionEngine::~CompletionEngine() { abort(); }

void CompletionEngine::watch(TestFn test, std::chrono::steady_clock::time_point deadline,
                             FinishFn finish) {
  {
    std::vector<Pending> finished;  // destroyed here, on the caller's thread, after the lock
    std::lock_guard<std::mutex> lock(state_->mutex);
    finished.swap(state_->finished);
    if (!state_->stopping) {
      state_->pending.push_back({std::move(test), deadline, std::move(finish)});
      if (!state_->started) {
        state_->started = true;
        std::thread(loop, state_).detach();
      }
      state_->arrived.notify_one();
      return;
    }
  }
  finish(aborted(), -1);
}

void CompletionEngine::abort() {
  std::deque<Pending> failed;
  std::vector<Pending> finished;  // destroyed on this thread, after the lock
  {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    failed.swap(state_->pending);
    state_->arrived.notify_all();
    // From a completion (on the thread itself) no test is running; from anywhere else, wait
    // for the one that is: after this, no test touches the runtime.
    if (state_->thread != std::this_thread::get_id()) {
      state_->tested.wait(lock, [&] { return !state_->testing; });
    }
    finished.swap(state_->finished);
  }
  fail_all(failed);
}

void CompletionEngine::loop(std::shared_ptr<State> state) {
  Backoff backoff;
  std::unique_lock<std::mutex> lock(state->mutex);
  state->thread = std::this_thread::get_id();
  while (true) {
    state->arrived.wait(lock, [&] { return state->stopping || !state->pending.empty(); });
    std::deque<Pending> batch, still;
    batch.swap(state->pending);
    bool progressed = false;
    while (!batch.empty() && !state->stopping) {
      Pending request = std::move(batch.front());
      batch.pop_front();
      state->testing = true;
      lock.unlock();
      Poll poll;
      std::exception_ptr error;
      try {
        poll = request.test();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      state->testing = false;
      state->tested.notify_all();
      if (!error && !poll.done && std::chrono::steady_clock::now() >= request.deadline) {
        error = std::make_exception_ptr(
            LinkError(LinkError::Kind::Timeout, "its request did not complete in time"));
      }
      if (!error && !poll.done) {
        still.push_back(std::move(request));
        continue;
      }
      progressed = true;
      lock.unlock();
      try {
        request.finish(error, poll.source_rank);
      } catch (const std::exception& e) {
        LOG(ERROR) << "occl_kit: a completion threw: " << e.what();
      }
      // Its test goes now: it may hold a library request that is cancelled when dropped (a
      // receive that timed out must not take a later message). Only the rest waits.
      request.test = nullptr;
      lock.lock();
      state->finished.push_back(std::move(request));
    }
    if (state->stopping) {  // what abort() did not see, this thread fails
      lock.unlock();
      fail_all(batch);
      fail_all(still);
      return;
    }
    // Requests that came meanwhile go after those still pending: tested in arrival order.
    for (auto& request : state->pending) still.push_back(std::move(request));
    state->pending.swap(still);
    lock.unlock();
    if (progressed) backoff.progressed();
    backoff.pause();
    lock.lock();
  }
}

}  // namespace occl::kit
