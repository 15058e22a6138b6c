#include "occl_kit/executor.hpp"

#include <c10/util/Logging.h>

#include <pthread.h>

#include <exception>
#include <stdexcept>

namespace occl::kit {

Executor::Executor() : queue_(std::make_shared<Queue>()) {
  // The worker owns its share of the queue; stop() waits for the work, not the thread.
  std::thread(loop, queue_).detach();
}

Executor::~Executor() { stop(); }

Executor::Ticket Executor::submit(Task task, Task cancel, bool caller_runs) {
  std::vector<Task> finished;  // destroyed here, on the caller's thread, after the lock
  Ticket ticket;
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->stopping) throw std::runtime_error("the backend has been shut down");
    ticket.queue_ = queue_;
    ticket.id_ = queue_->next_id++;
    queue_->tasks.push_back({ticket.id_, std::move(task), std::move(cancel)});
    finished.swap(queue_->finished);
  }
  if (!caller_runs) queue_->ready.notify_one();
  return ticket;
}

bool Executor::run_now(c10::function_ref<void()> task) {
  Queue& queue = *queue_;
  {
    std::vector<Task> finished;  // destroyed here, on the caller's thread, after the lock
    std::lock_guard<std::mutex> lock(queue.mutex);
    if (queue.running || queue.stopping || !queue.tasks.empty()) return false;
    queue.running = true;
    queue.runner = std::this_thread::get_id();
    finished.swap(queue.finished);
  }
  run_guarded(task);
  std::lock_guard<std::mutex> lock(queue.mutex);
  queue.running = false;
  queue.idle.notify_all();
  // Tasks submitted meanwhile from another thread, or a stop() from inside this one: the
  // worker's to take.
  if (!queue.tasks.empty() || queue.stopping) queue.ready.notify_one();
  return true;
}

void Executor::keep(Task closure) {
  std::lock_guard<std::mutex> lock(queue_->mutex);
  queue_->finished.push_back(std::move(closure));
}

bool Executor::Ticket::run_here() const {
  auto queue = queue_.lock();
  if (!queue) return false;
  std::unique_lock<std::mutex> lock(queue->mutex);
  // Tasks leave from the front, in id order: while the front is this one or an earlier one, this
  // one is still queued.
  bool ran_mine = false;
  while (!ran_mine && !queue->running && !queue->abandoned && !queue->tasks.empty() &&
         queue->tasks.front().id <= id_) {
    ran_mine = queue->tasks.front().id == id_;
    run_front(*queue, lock);
  }
  // The worker sleeps while another thread runs tasks: what is queued after them is its to take.
  if (!queue->running && (!queue->tasks.empty() || queue->stopping)) queue->ready.notify_one();
  return ran_mine;
}

void Executor::Ticket::wake_worker() const {
  auto queue = queue_.lock();
  if (!queue) return;
  {
    std::lock_guard<std::mutex> lock(queue->mutex);
    // Tasks leave from the front, in id order: is this one still queued?
    if (queue->tasks.empty() || queue->tasks.front().id > id_) return;
  }
  queue->ready.notify_one();
}

bool Executor::stop() {
  std::vector<Task> finished;
  std::unique_lock<std::mutex> lock(queue_->mutex);
  bool inside_task = queue_->running && queue_->runner == std::this_thread::get_id();
  queue_->stopping = true;
  queue_->abandoned = queue_->abandoned || inside_task;
  queue_->ready.notify_one();
  if (inside_task) return false;
  queue_->idle.wait(lock, [&] { return queue_->tasks.empty() && !queue_->running; });
  finished.swap(queue_->finished);
  lock.unlock();
  return true;
}

void Executor::run_guarded(c10::function_ref<void()> task) {
  try {
    task();
  } catch (const std::exception& e) {
    // Tasks report their own errors; this is a bug in a completion callback. Keep serving.
    LOG(ERROR) << "occl: an op's completion threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "occl: an op's completion threw";
  }
}

void Executor::run_front(Queue& queue, std::unique_lock<std::mutex>& lock) {
  Task task = std::move(queue.tasks.front().task);
  queue.tasks.pop_front();
  queue.running = true;
  queue.runner = std::this_thread::get_id();
  lock.unlock();
  run_guarded(task);
  lock.lock();
  queue.running = false;
  queue.finished.push_back(std::move(task));
  queue.idle.notify_all();
}

void Executor::loop(std::shared_ptr<Queue> queue) {
  ::pthread_setname_np(::pthread_self(), "occl-worker");  // for top -H, gdb and /proc
  constexpr int kLooksBeforeIdle = kLookAgainWhenIdle / kLookAgain;
  std::unique_lock<std::mutex> lock(queue->mutex);
  uint64_t submitted_before = queue->next_id;  // what was submitted when it last looked
  int empty_looks = 0;                          // looks since then that found nothing new
  for (;;) {
    empty_looks = queue->next_id == submitted_before ? empty_looks + 1 : 0;
    submitted_before = queue->next_id;
    // A task run by a waiting thread is waited for here, even when stopping.
    if (!queue->ready.wait_for(
            lock, empty_looks > kLooksBeforeIdle ? kLookAgainWhenIdle : kLookAgain, [&] {
              return !queue->running && (queue->stopping || !queue->tasks.empty());
            })) {
      continue;
    }
    if (queue->abandoned) {
      std::deque<Queue::Entry> cancelled;
      cancelled.swap(queue->tasks);
      queue->running = true;  // stop() waits for the cancels too (unless called from one)
      queue->runner = std::this_thread::get_id();
      lock.unlock();
      for (const auto& entry : cancelled) run_guarded(entry.cancel);
      cancelled.clear();  // their tensors may need the GIL: not under the lock
      lock.lock();
      queue->running = false;
      queue->idle.notify_all();
      return;
    }
    if (queue->tasks.empty()) {  // stopping, and nothing left to run
      queue->idle.notify_all();
      return;
    }
    run_front(*queue, lock);
  }
}

}  // namespace occl::kit
