// A library's request in flight, for runtimes whose library calls return a handle to poll
// (MPI_Request, a device queue's event): how to test it, how to cancel it where the library can,
// and the tensors it reads or writes.
//
// An op can end before its request does: its deadline passed, or its group was aborted. The
// library may still read or write the request's tensors then, so releasing an unfinished request
// abandons it: `cancel` runs, and the kit keeps the tensors alive until the process exits (it
// never frees memory the library may still write). abandoned_requests() counts them, for a
// library whose finalize may then wait for peers that never come.
#pragma once

#include "occl_kit/completion.hpp"

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace occl::kit {

class Request {
 public:
  // `test` says whether the request finished (and, for a receive from any source, from whom),
  // or throws its failure; `cancel` may be empty.
  Request(std::vector<at::Tensor> tensors, std::function<Poll()> test,
          std::function<void()> cancel = nullptr);
  ~Request();  // abandons the request if it has not finished
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Asks the library until the request has finished, then answers from memory.
  Poll test();

 private:
  std::vector<at::Tensor> tensors_;
  std::function<Poll()> test_;
  std::function<void()> cancel_;
  std::optional<Poll> finished_;
};

// How many requests this process has abandoned.
size_t abandoned_requests();

}  // namespace occl::kit
