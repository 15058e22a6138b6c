// For a library that a process initialises once and finalizes at exit (MPI, UCC). The kit's
// threads (a group's worker, its completion engine) may still call it then; and a request the
// kit abandoned (request.hpp) may make the finalize wait for peers that never come.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace occl::kit {

class Library {
 public:
  explicit Library(std::string name) : name_(std::move(name)) {}

  // Held across every call of the library: throws LinkError(Aborted) once it was finalized.
  std::shared_lock<std::shared_mutex> call();
  // Held while initialising it: no call runs meanwhile. Throws once it was finalized.
  std::unique_lock<std::shared_mutex> initialising();
  // Runs `finalize` (at exit) once the calls in progress have returned; no call runs after it.
  // Where requests were abandoned and `finalize` has not returned within `bound`, the process
  // exits with status 1 without it, saying why on stderr.
  void finalize(const std::function<void()>& finalize, std::chrono::seconds bound);

 private:
  const std::string name_;
  std::shared_mutex mutex_;
  bool finalized_ = false;
};

}  // namespace occl::kit
