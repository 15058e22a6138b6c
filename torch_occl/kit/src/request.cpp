#include "occl_kit/request.hpp"

#include <c10/util/Logging.h>

#include <mutex>

namespace occl::kit {
namespace {

// The tensors of abandoned requests, never freed: the library may still write into them.
struct Abandoned {
  std::mutex mutex;
  std::vector<std::vector<at::Tensor>> tensors;
};

Abandoned& abandoned() {
  static auto* state = new Abandoned();  // never destroyed: requests may be released at exit
  return *state;
}

}  // namespace

Request::Request(std::vector<at::Tensor> tensors, std::function<Poll()> test,
                 std::function<void()> cancel)
    : tensors_(std::move(tensors)), test_(std::move(test)), cancel_(std::move(cancel)) {}

Request::~Request() {
  if (finished_) return;
  try {
    if (cancel_) cancel_();
  } catch (const std::exception& e) {
    LOG(WARNING) << "occl_kit: cancelling an abandoned request failed: " << e.what();
  }
  std::lock_guard<std::mutex> lock(abandoned().mutex);
  abandoned().tensors.push_back(std::move(tensors_));
}

Poll Request::test() {
  if (finished_) return *finished_;
  Poll poll = test_();
  if (poll.done) finished_ = poll;
  return poll;
}

size_t abandoned_requests() {
  std::lock_guard<std::mutex> lock(abandoned().mutex);
  return abandoned().tensors.size();
}

}  // namespace occl::kit
