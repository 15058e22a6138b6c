#include "executor.hpp"

#include <c10/util/Logging.h>

#include <exception>
#include <stdexcept>

namespace occl::runtime {

Executor::Executor() : queue_(std::make_shared<Queue>()) {
  std::thread worker(loop, queue_);
  worker_id_ = worker.get_id();
  worker.detach();  // it owns its share of the queue; stop() waits for the work, not the thread
}

Executor::~Executor() { stop(); }

void Executor::submit(Task task) {
  std::vector<Task> finished;  // destroyed here, on the caller's thread, after the lock
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->stopping) throw std::runtime_error("the backend has been shut down");
    queue_->tasks.push_back(std::move(task));
    finished.swap(queue_->finished);
  }
  queue_->ready.notify_one();
}

bool Executor::stop() {
  bool on_worker = worker_id_ == std::this_thread::get_id();
  std::vector<Task> finished;
  std::unique_lock<std::mutex> lock(queue_->mutex);
  queue_->stopping = true;
  queue_->abandoned = queue_->abandoned || on_worker;
  queue_->ready.notify_one();
  if (on_worker) return false;
  queue_->idle.wait(lock, [&] { return queue_->tasks.empty() && !queue_->running; });
  finished.swap(queue_->finished);
  lock.unlock();
  return true;
}

void Executor::loop(std::shared_ptr<Queue> queue) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(queue->mutex);
      queue->ready.wait(lock, [&] { return queue->stopping || !queue->tasks.empty(); });
      if (queue->abandoned || queue->tasks.empty()) {  // stopping, and nothing left to run
        queue->tasks.clear();
        queue->idle.notify_all();
        return;
      }
      task = std::move(queue->tasks.front());
      queue->tasks.pop_front();
      queue->running = true;
    }
    try {
      task();
    } catch (const std::exception& e) {
      // Tasks report their own errors; this is a bug in a completion callback. Keep serving.
      LOG(ERROR) << "occl: an op's completion threw: " << e.what();
    } catch (...) {
      LOG(ERROR) << "occl: an op's completion threw";
    }
    {
      std::lock_guard<std::mutex> lock(queue->mutex);
      queue->running = false;
      queue->finished.push_back(std::move(task));
    }
    queue->idle.notify_all();
  }
}

}  // namespace occl::runtime
