// The completion engine: for libraries whose calls return a request handle to poll (MPI_Isend,
// a device queue's event), one thread per group tests the pending requests and completes their
// ops, so a runtime never writes its own progress thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace occl::kit {

// Whether a request has finished; `source_rank` for a receive from any source (else -1).
struct Poll {
  bool done = false;
  int source_rank = -1;
};

class CompletionEngine {
 public:
  // Tests one request: returns its state, or throws its failure. Called on the engine's thread.
  using TestFn = std::function<Poll()>;
  // Called once with nullptr or the failure, and the source rank.
  using FinishFn = std::function<void(std::exception_ptr, int)>;

  CompletionEngine() = default;
  ~CompletionEngine();  // fails what is still pending (abort()), then joins the thread
  CompletionEngine(const CompletionEngine&) = delete;
  CompletionEngine& operator=(const CompletionEngine&) = delete;

  // Tests `test` until it is done, throws, or `deadline` passes (then `finish` gets a
  // LinkError(Timeout)); the thread starts with the first request. Pending requests are tested
  // in the order they came; an idle engine sleeps, a busy one yields between passes (and
  // sleeps a little longer the longer nothing finishes).
  void watch(TestFn test, std::chrono::steady_clock::time_point deadline, FinishFn finish);
  // Fails every pending request with LinkError(Aborted) and stops the thread. Idempotent.
  void abort();

 private:
  struct Pending {
    TestFn test;
    std::chrono::steady_clock::time_point deadline;
    FinishFn finish;
  };
  // Shared with the thread, which outlives an engine destroyed from inside a completion.
  struct State {
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<Pending> pending;
    bool stopping = false;
  };
  static void loop(std::shared_ptr<State> state);

  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::thread thread_;  // guarded by state_->mutex
};

}  // namespace occl::kit
