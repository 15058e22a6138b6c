#include "occl_kit/library.hpp"

#include "occl_kit/errors.hpp"
#include "occl_kit/request.hpp"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

namespace occl::kit {

std::shared_lock<std::shared_mutex> Library::call() {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (finalized_) throw LinkError(LinkError::Kind::Aborted, name_ + " was finalized");
  return lock;
}

std::unique_lock<std::shared_mutex> Library::initialising() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (finalized_) throw LinkError(LinkError::Kind::Aborted, name_ + " was finalized");
  return lock;
}

void Library::finalize(const std::function<void()>& finalize, std::chrono::seconds bound) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  finalized_ = true;
  std::promise<void> returned;
  if (const size_t abandoned = abandoned_requests(); abandoned > 0) {
    // Detached: the process exits with or without it.
    std::thread([done = returned.get_future(), abandoned, bound, name = name_] {
      if (done.wait_for(bound) == std::future_status::ready) return;
      std::fprintf(stderr,
                   "occl_kit: %s's finalize did not return within %lld s, and %zu of its requests"
                   " were abandoned (their ops timed out or were aborted): exiting without it\n",
                   name.c_str(), static_cast<long long>(bound.count()), abandoned);
      std::_Exit(1);
    }).detach();
  }
  finalize();
  returned.set_value();
}

}  // namespace occl::kit
