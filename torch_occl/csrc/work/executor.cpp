#include "executor.hpp"

#include <c10/util/Logging.h>

#include <exception>
#include <stdexcept>

namespace occl::runtime {

Executor::Executor() : queue_(std::make_shared<Queue>()), worker_(loop, queue_) {}

Executor::~Executor() { stop(); }

void Executor::submit(Task task) {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->stopping) throw std::runtime_error("the backend has been shut down");
    queue_->tasks.push_back(std::move(task));
  }
  queue_->ready.notify_one();
}

void Executor::stop() {
  std::lock_guard<std::mutex> stopping(stop_mutex_);
  bool on_worker = worker_.get_id() == std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stopping = true;
    queue_->abandoned = queue_->abandoned || on_worker;
  }
  queue_->ready.notify_one();
  if (!worker_.joinable()) return;
  if (on_worker) {
    worker_.detach();
  } else {
    worker_.join();
  }
}

void Executor::loop(std::shared_ptr<Queue> queue) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(queue->mutex);
      queue->ready.wait(lock, [&] { return queue->stopping || !queue->tasks.empty(); });
      if (queue->abandoned || queue->tasks.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue->tasks.front());
      queue->tasks.pop_front();
    }
    try {
      task();
    } catch (const std::exception& e) {
      // Tasks report their own errors; this is a bug in a completion callback. Keep serving.
      LOG(ERROR) << "occl: an op's completion threw: " << e.what();
    } catch (...) {
      LOG(ERROR) << "occl: an op's completion threw";
    }
  }
}

}  // namespace occl::runtime
