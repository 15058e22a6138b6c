#include "runtime.hpp"

#include "transport/bootstrap.hpp"
#include "transport/mesh.hpp"
#include "work/executor.hpp"

#include <c10/util/Exception.h>

#include <sstream>

namespace occl::runtime {
namespace {

std::exception_ptr backend_error(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

Runtime::Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config)
    : rank_(rank), size_(size), config_(std::move(config)) {
  try {
    mesh_ = transport::bootstrap_mesh(store, rank, size, {config_.bind_address, config_.timeout});
  } catch (const transport::TransportError& e) {
    C10_THROW_ERROR(DistBackendError, "occl: cannot connect " + describe_group() + ": " + e.what());
  }
  executor_ = std::make_unique<Executor>();
}

Runtime::~Runtime() { shutdown(); }

void Runtime::submit(const char* label, std::chrono::milliseconds timeout, OpFn run, DoneFn done) {
  uint64_t sequence = next_sequence_++;
  try {
    executor_->submit([this, label, sequence, timeout, run = std::move(run),
                       done = std::move(done)] { execute(label, sequence, timeout, run, done); });
  } catch (const std::runtime_error& e) {
    TORCH_CHECK(false, label, ": ", e.what());
  }
}

void Runtime::shutdown() { executor_->stop(); }

void Runtime::abort() {
  mesh_->abort();
  executor_->stop();
}

std::string Runtime::describe_group() const {
  std::ostringstream out;
  out << "group " << config_.group_id << " (rank " << rank_ << " of " << size_;
  if (!config_.global_ranks_in_group.empty()) {
    out << "; global ranks";
    for (auto r : config_.global_ranks_in_group) out << ' ' << r;
  }
  out << ")";
  return out.str();
}

void Runtime::execute(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
                      const OpFn& run, const DoneFn& done) {
  if (timeout == c10d::kUnsetTimeout) timeout = config_.timeout;
  auto prefix = [&] {
    std::ostringstream out;
    out << label << " #" << sequence << " in " << describe_group() << ": ";
    return out.str();
  };
  if (!broken_.empty()) {
    done(backend_error(prefix() + "not run, the group failed earlier: " + broken_));
    return;
  }
  OpContext ctx{*mesh_, rank_, size_, transport::Clock::now() + timeout};
  try {
    run(ctx);
    done(nullptr);
    return;
  } catch (const transport::TransportError& e) {
    // A failed exchange leaves the links mid-message: nothing after it can be trusted.
    std::string what = e.kind() == transport::TransportError::Kind::Timeout
                           ? "timed out after " + std::to_string(timeout.count()) + " ms, " +
                                 e.what()
                           : e.what();
    broken_ = prefix() + what;
    done(backend_error(broken_));
  } catch (const std::exception& e) {
    broken_ = prefix() + e.what();
    done(backend_error(broken_));
  }
}

}  // namespace occl::runtime
