#include "occl_kit/telemetry.hpp"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace occl::kit {

DebugLevel debug_level(const std::string& backend) {
  static std::mutex mutex;
  static std::map<std::string, DebugLevel> levels;
  std::lock_guard<std::mutex> lock(mutex);
  auto known = levels.find(backend);
  if (known != levels.end()) return known->second;
  std::string variable = backend + "_DEBUG";
  std::transform(variable.begin(), variable.end(), variable.begin(), [](unsigned char c) {
    return std::isalnum(c) ? static_cast<char>(std::toupper(c)) : '_';
  });
  const char* value = std::getenv(variable.c_str());
  std::string text = value ? value : "";
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const DebugLevel level = text == "TRACE" ? DebugLevel::Trace
                           : text == "INFO" ? DebugLevel::Info
                                            : DebugLevel::Off;
  return levels[backend] = level;
}

void debug_log(const std::string& backend, DebugLevel level, const std::string& where,
               const std::string& message) {
  // One fprintf per line: lines of several threads do not interleave.
  std::fprintf(stderr, "%s %s %s: %s\n", backend.c_str(),
               level == DebugLevel::Trace ? "TRACE" : "INFO", where.c_str(), message.c_str());
}

struct CompletionHook::State {
  std::mutex mutex;
  std::condition_variable posted;
  std::deque<std::shared_ptr<c10d::WorkInfo>> queue;
  // Never destroyed: destroying a Python hook takes the GIL, which the thread that would do it
  // (this one, the last to hold the state) cannot take once the interpreter is exiting.
  Fn* hook = nullptr;
  bool stopping = false;
};

CompletionHook::~CompletionHook() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!state_) return;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->posted.notify_all();
}

void CompletionHook::set(Fn hook, const std::string& backend) {
  std::lock_guard<std::mutex> guard(mutex_);
  TORCH_CHECK(!state_, backend, ": a completion hook is registered already (one per group)");
  auto state = std::make_shared<State>();
  state->hook = new Fn(std::move(hook));
  std::thread([state] {
    std::unique_lock<std::mutex> lock(state->mutex);
    while (true) {
      state->posted.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) return;  // stopping, and every posted op was reported
      auto info = std::move(state->queue.front());
      state->queue.pop_front();
      lock.unlock();
      try {
        (*state->hook)(std::move(info));
      } catch (const std::exception& e) {
        LOG(ERROR) << "occl_kit: a completion hook threw: " << e.what();
      }
      lock.lock();
    }
  }).detach();
  state_ = std::move(state);
  set_ = true;
}

void CompletionHook::post(std::shared_ptr<c10d::WorkInfo> info) {
  std::shared_ptr<State> state;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    state = state_;
  }
  if (!state) return;
  std::lock_guard<std::mutex> lock(state->mutex);
  state->queue.push_back(std::move(info));
  state->posted.notify_one();
}

std::tuple<int, int> global_rank_start_and_stride(const std::vector<uint64_t>& global_ranks) {
  if (global_ranks.empty()) return {0, 1};
  if (global_ranks.size() == 1) return {static_cast<int>(global_ranks[0]), 0};
  const int64_t stride = static_cast<int64_t>(global_ranks[1]) - static_cast<int64_t>(global_ranks[0]);
  for (size_t i = 1; i < global_ranks.size(); ++i) {
    if (static_cast<int64_t>(global_ranks[i]) - static_cast<int64_t>(global_ranks[i - 1]) != stride) {
      return {-1, -1};
    }
  }
  return {static_cast<int>(global_ranks[0]), static_cast<int>(stride)};
}

}  // namespace occl::kit
