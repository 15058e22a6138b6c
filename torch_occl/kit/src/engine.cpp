#include "occl_kit/engine.hpp"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <sstream>

namespace occl::kit {
namespace {

std::exception_ptr backend_error(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

// Completes an op. Its completion runs the Work's future callbacks (user code, for DDP comm
// hooks): an exception there is logged, never allowed to end the worker or another thread.
void finish_op(Work& work, std::exception_ptr error, int source_rank) {
  try {
    work.complete(error, source_rank);
  } catch (const std::exception& e) {
    LOG(ERROR) << "occl_kit: a completion callback threw: " << e.what();
  }
}

// "occl.allreduce #3 in group 0 (rank 1 of 2): ", which starts every error of an op.
std::string op_prefix(const char* label, uint64_t sequence, const std::string& group) {
  return std::string(label) + " #" + std::to_string(sequence) + " in " + group + ": ";
}

// The error text of a failed op, the timeout spelled out.
std::string failure_text(std::exception_ptr error, std::chrono::milliseconds timeout) {
  try {
    std::rethrow_exception(error);
  } catch (const LinkError& e) {
    if (e.kind() != LinkError::Kind::Timeout) return e.what();
    return "timed out after " + std::to_string(timeout.count()) + " ms, " + e.what();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
}

// "occl.allreduce" -> "allreduce": the op as every rank's signature names it.
std::string op_name(const char* label) {
  std::string name = label;
  return name.substr(name.find('.') + 1);
}

}  // namespace

std::string describe_group(const std::string& name, int rank, int size,
                           const std::vector<uint64_t>& global_ranks) {
  std::ostringstream out;
  out << "group " << (name.empty() ? "(unnamed)" : name) << " (rank " << rank << " of " << size;
  if (!global_ranks.empty()) {
    out << "; global ranks";
    for (auto r : global_ranks) out << ' ' << r;
  }
  out << ")";
  return out.str();
}

void OpContext::complete_when(CompletionEngine::TestFn test) const {
  completions->watch(std::move(test), deadline, done);
}

void OpContext::wait_until(const std::function<bool()>& done, const std::string& what) const {
  const bool completed = poll_until(deadline, [&] {
    if (aborted != nullptr && aborted->load()) {
      throw LinkError(LinkError::Kind::Aborted, "the communicator was aborted");
    }
    return done();
  });
  if (!completed) throw LinkError(LinkError::Kind::Timeout, what);
}

void Runtime::exchange_signatures(OpContext& ctx, const void*, void*, size_t) {
  TORCH_CHECK(false, ctx.label, ": the spec turns agreement on, but the runtime does not ",
              "override exchange_signatures()");
}

std::string Runtime::gave_up(const std::string& failure, const LinkError&) { return failure; }

Engine::Engine(Runtime& runtime, GroupInfo group, bool agree)
    : runtime_(runtime),
      group_(std::move(group)),
      agree_(agree && group_.size > 1 && runtime.agreement_enabled()),
      group_description_(std::make_shared<const std::string>(
          describe_group(group_.name, group_.rank, group_.size, group_.global_ranks))),
      coalesced_title_(group_.backend + ":coalesced") {}

Engine::~Engine() { shutdown(); }

std::string Engine::describe_op(const char* label, uint64_t sequence) const {
  return op_prefix(label, sequence, *group_description_);
}

void Engine::collect(const c10::intrusive_ptr<Work>& work) {
  if (coalescing_) coalesced_.push_back(work);
}

c10::intrusive_ptr<Work> Engine::queue(const OpInfo& op, std::chrono::milliseconds timeout,
                                       bool async_op, std::vector<at::Tensor> outputs,
                                       Signature signature, OpFn run) {
  if (timeout == c10d::kUnsetTimeout) timeout = group_.timeout;
  auto work = c10::make_intrusive<Work>(group_.rank, op.type, op.profiling_title, std::move(outputs));
  const uint64_t sequence = collectives_submitted_++;
  auto task = [this, op, sequence, timeout, signature = std::move(signature),
               run = std::move(run), work]() mutable {
    execute(op, sequence, timeout, signature, run, *work);
  };
  // Must not touch the engine, which may be gone by then.
  auto cancel = [label = op.label, sequence, group = group_description_, work] {
    finish_op(*work,
              backend_error(op_prefix(label, sequence, *group) + "not run, the backend was " +
                            "shut down from inside an earlier op's completion"),
              -1);
  };
  try {
    work->ticket_ = executor_.submit(std::move(task), std::move(cancel), !async_op);
  } catch (const std::runtime_error& e) {
    TORCH_CHECK(false, op.label, ": ", e.what());
  }
  collect(work);
  return work;
}

void Engine::execute(OpInfo op, uint64_t sequence, std::chrono::milliseconds timeout,
                     Signature& signature, const OpFn& run, Work& work) {
  if (!broken_.empty()) {
    finish_op(work,
              backend_error(describe_op(op.label, sequence) +
                            "not run, the group failed earlier: " + broken_),
              -1);
    return;
  }
  OpContext ctx{group_.rank, group_.size, op.label, sequence, Clock::now() + timeout, nullptr,
                nullptr, &aborted_};
  try {
    if (agree_) {
      signature.op = op_name(op.label);
      signature.sequence = sequence;
      agree(signature, group_.rank, group_.size,
            [&](const void* record, void* everyone, size_t bytes) {
              runtime_.exchange_signatures(ctx, record, everyone, bytes);
            });
    }
    run(ctx);
  } catch (const LinkError& e) {
    // A failed exchange leaves the links mid-message: nothing after it can be trusted.
    broken_ = runtime_.gave_up(
        describe_op(op.label, sequence) + failure_text(std::current_exception(), timeout), e);
    finish_op(work, backend_error(broken_), -1);
    return;
  } catch (...) {
    // Failed before or after its messages (a mismatch, writing the result back): the links
    // are fine.
    finish_op(work,
              backend_error(describe_op(op.label, sequence) +
                            failure_text(std::current_exception(), timeout)),
              -1);
    return;
  }
  finish_op(work, nullptr, -1);
}

c10::intrusive_ptr<Work> Engine::post(const OpInfo& op, std::chrono::milliseconds timeout,
                                      std::vector<at::Tensor> outputs, OpFn run) {
  if (timeout == c10d::kUnsetTimeout) timeout = group_.timeout;
  auto work = c10::make_intrusive<Work>(group_.rank, op.type, op.profiling_title, std::move(outputs));
  const uint64_t sequence = p2p_submitted_++;
  std::string prefix = describe_op(op.label, sequence);
  auto done = [prefix, timeout, work](std::exception_ptr error, int source) {
    finish_op(*work, error ? backend_error(prefix + failure_text(error, timeout)) : nullptr,
              source);
  };
  OpContext ctx{group_.rank, group_.size, op.label, sequence, Clock::now() + timeout, done,
                &completions_, &aborted_};
  try {
    run(ctx);
  } catch (...) {
    done(std::current_exception(), -1);
  }
  collect(work);
  return work;
}

void Engine::start_coalescing() {
  TORCH_CHECK(!coalescing_, group_.backend, ": startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  runtime_.start_coalescing();
}

c10::intrusive_ptr<Work> Engine::end_coalescing() {
  TORCH_CHECK(coalescing_, group_.backend, ": endCoalescing called without startCoalescing");
  coalescing_ = false;
  auto works = std::move(coalesced_);
  coalesced_.clear();
  runtime_.end_coalescing();
  return Work::all_of(group_.rank, coalesced_title_.c_str(), std::move(works));
}

void Engine::shutdown() {
  // Once no op runs, the links go at once: Python may keep the backend object alive long after
  // destroy_process_group().
  if (executor_.stop() && !closed_.exchange(true)) runtime_.close();
}

void Engine::abort() {
  // Also after shutdown: point-to-point ops may still be in flight. No lock is held across the
  // runtime's hooks, which may complete ops (and so run user callbacks) at once.
  aborted_ = true;
  runtime_.abort();
  completions_.abort();
  shutdown();
}

}  // namespace occl::kit
