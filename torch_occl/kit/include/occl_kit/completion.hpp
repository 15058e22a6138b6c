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
#include <vector>

namespace occl::kit {

// How a poller waits between tests of requests that have not finished: it yields at first, then
// sleeps a little longer each time nothing finished, up to 1 ms; a slow request costs little, a
// quick one is seen soon.
class Backoff {
 public:
  void progressed() { idle_passes_ = 0; }
  void pause();  // after a pass in which nothing finished

 private:
  int idle_passes_ = 0;
};

// Tests `done` with a Backoff between tests until it returns true (then true) or `deadline`
// passes (then false). Queued ops call it through OpContext::wait_until.
bool poll_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done);

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
  ~CompletionEngine();  // same as abort()
  CompletionEngine(const CompletionEngine&) = delete;
  CompletionEngine& operator=(const CompletionEngine&) = delete;

  // Tests `test` until it is done, throws, or `deadline` passes (then `finish` gets a
  // LinkError(Timeout)); the thread starts with the first request. Pending requests are tested
  // in the order they came; an idle engine sleeps, a busy one yields between passes (and
  // sleeps a little longer the longer nothing finishes).
  void watch(TestFn test, std::chrono::steady_clock::time_point deadline, FinishFn finish);
  // Fails every pending request with LinkError(Aborted) and stops the thread. Idempotent. Once
  // it returns no test runs any more (a runtime may go); the thread is never joined: a completion
  // it runs may be waiting for a GIL the caller holds.
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
    std::condition_variable tested;  // signalled when a test has returned
    std::deque<Pending> pending;
    // Requests that have finished, less their tests, destroyed by the next watch() or abort() on
    // the caller's thread, never on the engine's: the last reference to an op's Work drops tensors Python
    // also holds, which takes the GIL, and a thread waiting for the GIL while the interpreter
    // shuts down is killed mid-destructor (std::terminate).
    std::vector<Pending> finished;
    bool started = false;
    bool stopping = false;
    bool testing = false;   // the thread is inside a request's test
    std::thread::id thread;
  };
  static void loop(std::shared_ptr<State> state);

  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace occl::kit
