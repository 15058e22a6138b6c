// One worker thread per group that runs its ops in the order they were issued.
//
// Ops of one group must run in issue order on every rank (that is what makes the ranks agree on
// what each message is); groups have their own executor, so they never block each other.
// A thread that is about to wait for an op may run it itself, with any queued before it, when no
// task is running: the order is the same, and two thread hand-offs (wake the worker, be woken by
// it) are saved.
#pragma once

#include <c10/util/FunctionRef.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace occl::kit {

class Executor {
  struct Queue;

 public:
  using Task = std::function<void()>;

  // Names one submitted task; empty when default-constructed.
  class Ticket {
   public:
    Ticket() = default;
    // Runs the tasks queued before this one and then this one on the calling thread, in order,
    // while no other thread runs a task; returns true once this one has run here. Returns false
    // when another thread runs a task (the worker, which takes the rest in order) or has run
    // this one, or the executor is gone.
    bool run_here() const;
    // Wakes the worker, if the task is still queued: for a task submitted with `caller_runs`
    // whose caller waits some other way.
    void wake_worker() const;

   private:
    friend class Executor;
    std::weak_ptr<Queue> queue_;
    uint64_t id_ = 0;
  };

  Executor();
  ~Executor();  // same as stop()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `caller_runs`: the task's caller will wait for it through run_here(), so the worker is not
  // woken for it (were the worker woken on another core, it would only take that core from a
  // rank that needs it). A worker that is awake still takes it when it is next, and an idle
  // worker looks for one nobody claimed every kLookAgain.
  // `cancel` runs instead of `task` if the executor is stopped from inside an earlier task.
  Ticket submit(Task task, Task cancel, bool caller_runs);
  // Runs `task` on the calling thread at once when nothing is queued or running (the order is
  // the same as through the queue, without its allocations and hand-offs) and returns true;
  // returns false, without running it, otherwise or once stopped. Like submit(), it first
  // destroys the tasks that have run (and what `keep` was given).
  bool run_now(c10::function_ref<void()> task);
  // Holds `closure` as the queue holds a task that has run: until the next submit(), run_now()
  // or stop(). For what a task run by run_now() must keep alive that long.
  void keep(Task closure);
  // Runs every queued task and returns once the last has run, destroying the finished tasks on
  // the calling thread; later submits are rejected. Idempotent and thread-safe. The worker then
  // exits on its own (never joined: it might wait for a GIL the caller holds). Called from a task
  // itself (a completion that shuts the backend down, or drops its last reference), the worker
  // cancels what is queued: the task's owner may be gone. Returns true when no task runs any
  // more (false when called from inside a task).
  bool stop();

  // How long an idle worker sleeps before it looks for a task its caller has not claimed: the
  // longest a caller_runs task waits for a caller that never waits for it. After a second with
  // nothing submitted, it looks once a second, so that an idle process stays asleep.
  static constexpr std::chrono::milliseconds kLookAgain{100};
  static constexpr std::chrono::milliseconds kLookAgainWhenIdle{1000};

 private:
  // Shared with the worker thread, so it outlives an Executor destroyed from inside a task.
  struct Queue {
    struct Entry {
      uint64_t id;
      Task task;
      Task cancel;
    };
    std::mutex mutex;
    std::condition_variable ready;
    std::condition_variable idle;  // signalled when a task has run
    std::deque<Entry> tasks;
    uint64_t next_id = 1;
    // Tasks that have run, destroyed by the next submit(), run_now() or stop() on the caller's
    // thread, never here: dropping a tensor Python also holds takes the GIL, and a thread waiting
    // for the GIL when the interpreter shuts down is killed mid-destructor (std::terminate).
    std::vector<Task> finished;
    bool running = false;    // a task is running, on `runner`
    std::thread::id runner;  // the worker, or a thread that ran the task it waits for
    bool stopping = false;
    bool abandoned = false;  // stopped from inside a task: cancel the rest, then exit
  };
  static void loop(std::shared_ptr<Queue> queue);
  // Pops the front task and runs it on this thread; `lock` is held on entry and on return.
  static void run_front(Queue& queue, std::unique_lock<std::mutex>& lock);
  // Runs a task (or a cancel): an exception from it is logged, never thrown.
  static void run_guarded(c10::function_ref<void()> task);

  std::shared_ptr<Queue> queue_;
};

}  // namespace occl::kit
