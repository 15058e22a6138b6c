// One worker thread per group that runs its ops in the order they were issued.
//
// Ops of one group must run in issue order on every rank (that is what makes the ranks agree on
// what each message is); groups have their own executor, so they never block each other.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace occl::runtime {

class Executor {
 public:
  using Task = std::function<void()>;

  Executor();
  ~Executor();  // same as stop()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void submit(Task task);
  // Runs every queued task and returns once the last has run, destroying the finished tasks on
  // the calling thread; later submits are rejected. Idempotent and thread-safe. The worker then
  // exits on its own (never joined: it might wait for a GIL the caller holds). Called from a task
  // itself (the backend's last reference dropped in a completion), the worker drops what is
  // queued. Returns true when no task runs any more (false when called from inside a task).
  bool stop();

 private:
  // Shared with the worker thread, so it outlives an Executor destroyed from inside a task.
  struct Queue {
    std::mutex mutex;
    std::condition_variable ready;
    std::condition_variable idle;  // signalled when a task has run
    std::deque<Task> tasks;
    // Tasks that have run, destroyed by the next submit() or stop() on the caller's thread,
    // never here: dropping a tensor Python also holds takes the GIL, and a thread waiting for
    // the GIL when the interpreter shuts down is killed mid-destructor (std::terminate).
    std::vector<Task> finished;
    bool running = false;    // a task is running
    bool stopping = false;
    bool abandoned = false;  // stopped from inside a task: exit without running the rest
  };
  static void loop(std::shared_ptr<Queue> queue);

  std::shared_ptr<Queue> queue_;
  std::thread::id worker_id_;
};

}  // namespace occl::runtime
