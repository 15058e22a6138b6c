// One worker thread per group that runs its ops in the order they were issued.
//
// Ops of one group must run in issue order on every rank (that is what makes the ranks agree on
// what each message is); groups have their own executor, so they never block each other.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace occl::runtime {

class Executor {
 public:
  using Task = std::function<void()>;

  Executor();
  ~Executor();  // same as stop()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void submit(Task task);
  // Runs every queued task, then joins the worker. Later submits are rejected. Idempotent.
  void stop();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace occl::runtime
