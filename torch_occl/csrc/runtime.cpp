#include "runtime.hpp"

#include "tuning.hpp"
#include "transport/bootstrap.hpp"
#include "transport/mesh.hpp"
#include "transport/p2p.hpp"
#include "work/executor.hpp"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

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

// Completes an op. Its completion runs the Work's future callbacks (user code, for DDP comm
// hooks): an exception there is logged, never allowed to end the worker or engine thread.
void finish_op(const DoneFn& done, std::exception_ptr error, int source_rank) {
  try {
    done(error, source_rank);
  } catch (const std::exception& e) {
    LOG(ERROR) << "occl: a completion callback threw: " << e.what();
  }
}

// How long a rank that gave up on a collective waits for the kernel to take its reports to the
// other ranks, and, after a timeout, for the reports of the ranks it waited for: a rank that was
// itself waiting for another one says so, and the error names the rank everyone waits for.
constexpr auto kReportFlush = std::chrono::milliseconds(200);
// The latter is longer: a rank that waits too started its op later by as much as it lags.
constexpr auto kPeerReportGrace = std::chrono::seconds(1);

// "occl.allreduce #3 in group 0 (rank 1 of 2): ", which starts every error of an op.
std::string op_prefix(const char* label, uint64_t sequence, const std::string& group) {
  return std::string(label) + " #" + std::to_string(sequence) + " in " + group + ": ";
}

}  // namespace

Runtime::Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config)
    : rank_(rank),
      size_(size),
      config_(std::move(config)),
      group_description_(std::make_shared<const std::string>(make_group_description())) {
  try {
    // Collectives and point-to-point messages travel on links of their own: p2p messages arrive
    // in any order and must never sit in the way of a collective's frames. Collectives between
    // ranks on one host go through shared memory; their sockets then only signal liveness.
    const size_t send_buffer = Tuning::get().loopback_send_buffer_bytes;
    transport::Bootstrap bootstrap(store, rank, size, config_.timeout);
    auto sockets = bootstrap.connect_group({config_.bind_address, "collective", send_buffer});
    auto shm = transport::connect_shared_memory(
        bootstrap, {transport::transport_mode_from_env(), Tuning::get().shm_ring_bytes});
    mesh_ = std::make_shared<transport::Mesh>(rank, size, std::move(sockets), std::move(shm));
    // Large messages between ranks that may copy from each other's memory are lent (p2p.hpp).
    std::optional<transport::PeerMemory> peer_memory;
    if (mesh_->peer_memory()) peer_memory = *mesh_->peer_memory();
    p2p_ = std::make_unique<transport::P2PEngine>(
        rank, size, bootstrap.connect_group({config_.bind_address, "p2p", send_buffer}),
        std::move(peer_memory), Tuning::get().single_copy_min_bytes,
        [mesh = std::weak_ptr<transport::Mesh>(mesh_)](int peer, const std::string& report) {
          if (auto alive = mesh.lock()) alive->peer_gave_up(peer, report);
        });
    bootstrap.finish();
  } catch (const transport::TransportError& e) {
    C10_THROW_ERROR(DistBackendError, "occl: cannot connect " + describe_group() + ": " + e.what());
  } catch (const c10::DistStoreError& e) {
    C10_THROW_ERROR(DistBackendError, "occl: cannot connect " + describe_group() +
                                          ", the store failed: " + e.what_without_backtrace());
  }
  executor_ = std::make_unique<Executor>();
}

Runtime::~Runtime() { shutdown(); }

Ticket Runtime::submit(Dispatch dispatch, const char* label, std::chrono::milliseconds timeout,
                       bool caller_waits, OpFn run, DoneFn done) {
  if (timeout == c10d::kUnsetTimeout) timeout = config_.timeout;
  if (dispatch == Dispatch::Posted) {
    post(label, p2p_submitted_++, timeout, run, std::move(done));
    return {};
  }
  uint64_t sequence = collectives_submitted_++;
  try {
    auto task = [this, label, sequence, timeout, run = std::move(run), done] {
      execute(label, sequence, timeout, run, done);
    };
    // Must not touch the runtime, which may be gone by then.
    auto cancel = [label, sequence, group = group_description_, done = std::move(done)] {
      finish_op(done,
                backend_error(op_prefix(label, sequence, *group) + "not run, the backend was " +
                              "shut down from inside an earlier op's completion"),
                -1);
    };
    return executor_->submit(std::move(task), std::move(cancel), caller_waits);
  } catch (const std::runtime_error& e) {
    TORCH_CHECK(false, label, ": ", e.what());
  }
}

void Runtime::shutdown() {
  // Once no op runs, the collective links (sockets and the shared-memory region) go at once:
  // Python may keep the backend object alive long after destroy_process_group().
  if (executor_->stop()) {
    std::lock_guard<std::mutex> lock(mesh_mutex_);
    mesh_.reset();
  }
}

void Runtime::abort() {
  {
    std::lock_guard<std::mutex> lock(mesh_mutex_);
    if (mesh_) mesh_->abort();
  }
  p2p_->abort();
  shutdown();
}

std::string Runtime::describe_group() const { return *group_description_; }

std::string Runtime::make_group_description() const {
  std::ostringstream out;
  out << "group " << config_.group_id << " (rank " << rank_ << " of " << size_;
  if (!config_.global_ranks_in_group.empty()) {
    out << "; global ranks";
    for (auto r : config_.global_ranks_in_group) out << ' ' << r;
  }
  out << ")";
  return out.str();
}

std::string Runtime::describe_op(const char* label, uint64_t sequence) const {
  return op_prefix(label, sequence, *group_description_);
}

namespace {

// The error text of a failed op, the timeout spelled out.
std::string failure_text(std::exception_ptr error, std::chrono::milliseconds timeout) {
  try {
    std::rethrow_exception(error);
  } catch (const transport::TransportError& e) {
    if (e.kind() != transport::TransportError::Kind::Timeout) return e.what();
    return "timed out after " + std::to_string(timeout.count()) + " ms, " + e.what();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

void Runtime::execute(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
                      const OpFn& run, const DoneFn& done) {
  if (!broken_.empty()) {
    finish_op(done,
              backend_error(describe_op(label, sequence) +
                            "not run, the group failed earlier: " + broken_),
              -1);
    return;
  }
  OpContext ctx{*mesh_, *p2p_, rank_, size_, label, sequence, transport::Clock::now() + timeout,
                nullptr};
  try {
    run(ctx);
  } catch (const transport::TransportError& e) {
    // A failed exchange leaves the links mid-message: nothing after it can be trusted.
    broken_ = give_up(describe_op(label, sequence) + failure_text(std::current_exception(), timeout), e);
    finish_op(done, backend_error(broken_), -1);
    return;
  } catch (...) {
    // Failed before or after its messages (e.g. writing the result back): the links are fine.
    finish_op(done,
              backend_error(describe_op(label, sequence) +
                            failure_text(std::current_exception(), timeout)),
              -1);
    return;
  }
  finish_op(done, nullptr, -1);
}

// Tells the other ranks that this one gave up, unless it did so because of one of them (or of
// abort()): each knows already. After a timeout, adds what the awaited ranks reported.
std::string Runtime::give_up(const std::string& failure, const transport::TransportError& error) {
  if (error.kind() == transport::TransportError::Kind::Aborted) return failure;
  p2p_->announce_failure(failure, transport::Clock::now() + kReportFlush);
  if (error.kind() != transport::TransportError::Kind::Timeout) return failure;
  std::string text = failure;
  for (const auto& [peer, report] :
       mesh_->reports_from(error.awaited(), transport::Clock::now() + kPeerReportGrace)) {
    text += "; rank " + std::to_string(peer) + " was waiting too: " + report;
  }
  return text;
}

void Runtime::post(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
                   const OpFn& run, DoneFn done) {
  std::string prefix = describe_op(label, sequence);
  auto finish = [prefix, timeout, done = std::move(done)](std::exception_ptr error, int source) {
    finish_op(done, error ? backend_error(prefix + failure_text(error, timeout)) : nullptr,
              source);
  };
  OpContext ctx{*mesh_, *p2p_, rank_, size_, label, sequence, transport::Clock::now() + timeout,
                finish};
  try {
    run(ctx);
  } catch (...) {
    finish(std::current_exception(), -1);
  }
}

}  // namespace occl::runtime
