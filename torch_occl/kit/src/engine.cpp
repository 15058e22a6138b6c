#include "occl_kit/engine.hpp"

#include "occl_kit/flight_recorder.hpp"
#include "occl_kit/rendezvous.hpp"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

#include <algorithm>
#include <optional>
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
void finish_op(Work& work, std::exception_ptr error, int source_rank,
               CompletionHook* hook = nullptr) {
  try {
    work.complete(error, source_rank);
  } catch (const std::exception& e) {
    LOG(ERROR) << "occl_kit: a completion callback threw: " << e.what();
  }
  if (hook != nullptr && !error && work.timed()) hook->post(work.info());
}

// "occl.allreduce #3 in group 0 (rank 1 of 2)": how errors and logs name an op.
std::string op_in_group(const std::string& label, uint64_t sequence, const std::string& group) {
  return label + " #" + std::to_string(sequence) + " in " + group;
}

// "occl.allreduce #3 in group 0 (rank 1 of 2): ", which starts every error of an op.
std::string op_prefix(const char* label, uint64_t sequence, const std::string& group) {
  return op_in_group(label, sequence, group) + ": ";
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

int64_t total_elements(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& tensor : tensors) total += tensor.numel();
  return total;
}

// What the tensors hold as dense tensors (a sparse tensor has no nbytes()).
size_t total_bytes(const std::vector<at::Tensor>& tensors) {
  size_t total = 0;
  for (const auto& tensor : tensors) total += tensor.numel() * tensor.element_size();
  return total;
}

// torch's record_param_comms, as NCCL's ops record it: a profiler event carrying the op's name,
// sequence number, group, element counts and dtype. Called only while a profiler listens.
void record_param_comms(const c10d::Backend& backend, const GroupInfo& group, const OpInfo& op,
                        uint64_t sequence, bool p2p, bool async_op,
                        const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs) {
  const auto [rank_start, rank_stride] = global_rank_start_and_stride(group.global_ranks);
  const auto& typed = inputs.empty() ? outputs : inputs;
  const at::ScalarType dtype = typed.empty() ? at::kByte : typed[0].scalar_type();
  RECORD_PARAM_COMMS_DATA_WITH_ASYNC_OP(
      std::make_tuple(static_cast<int64_t>(sequence), p2p),
      std::make_tuple(backend.getGroupUid(), backend.getGroupDesc()), inputs, outputs,
      group.rank, op_name(op.label), total_elements(inputs), total_elements(outputs), dtype,
      std::vector<int64_t>(), std::vector<int64_t>(), rank_start, rank_stride, group.size,
      async_op);
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

Engine::Engine(Runtime& runtime, const c10d::Backend& backend, GroupInfo group, bool agree,
               c10::intrusive_ptr<c10d::Store> store)
    : runtime_(runtime),
      backend_(backend),
      group_(std::move(group)),
      agree_(agree && group_.size > 1 && runtime.agreement_enabled()),
      carries_signatures_(runtime.carries_signatures()),
      deferred_async_max_bytes_(runtime.deferred_async_max_bytes()),
      group_description_(std::make_shared<const std::string>(
          describe_group(group_.name, group_.rank, group_.size, group_.global_ranks))),
      coalesced_title_(group_.backend + ":coalesced"),
      debug_(debug_level(group_.backend)),
      store_(std::move(store)),
      recorded_as_(FlightRecorder::get().add_group(
          [&] {
            if (!group_.global_ranks.empty()) return group_.global_ranks;
            std::vector<uint64_t> ranks(group_.size);
            for (int r = 0; r < group_.size; ++r) ranks[r] = r;
            return ranks;
          }(),
          group_.rank)) {}

Engine::~Engine() { shutdown(); }

std::string Engine::describe_op(const char* label, uint64_t sequence) const {
  return op_prefix(label, sequence, *group_description_);
}

void Engine::collect(const c10::intrusive_ptr<Work>& work) {
  if (coalescing_) coalesced_.push_back(work);
}

c10::intrusive_ptr<Work> Engine::start(const OpInfo& op, uint64_t sequence, bool p2p,
                                       bool async_op, bool deferred,
                                       std::chrono::milliseconds timeout, TensorsFn inputs,
                                       std::vector<at::Tensor> outputs) {
  const bool trace = C10_UNLIKELY(debug_ >= DebugLevel::Trace);
  const bool profiled = C10_UNLIKELY(at::hasCallbacks());
  if (trace || profiled) {
    const std::vector<at::Tensor> read = inputs();
    if (trace) {
      debug_log(group_.backend, DebugLevel::Trace,
                op_in_group(op.label, sequence, *group_description_),
                std::to_string(total_elements(read)) + " elements in, " +
                    std::to_string(total_elements(outputs)) + " out" +
                    (read.empty() ? "" : " (" + dtype_name(read[0].scalar_type()) + ")") +
                    (!async_op ? "" : deferred ? ", async (run when waited for)"
                                               : ", async (started at once)"));
    }
    if (profiled) record_param_comms(backend_, group_, op, sequence, p2p, async_op, read, outputs);
  }
  const int64_t record =
      p2p || !FlightRecorder::get().enabled()
          ? -1
          : FlightRecorder::get().record(
                recorded_as_, backend_.getGroupUid().empty() ? group_.name : backend_.getGroupUid(),
                backend_.getGroupDesc(), op.label, sequence, inputs(), outputs, timeout);
  auto work = c10::make_intrusive<Work>(group_.rank, op.type, op.profiling_title, profiled,
                                        std::move(outputs), sequence,
                                        timing_ || completion_hook_->is_set());
  work->record_ = record;
  return work;
}

std::string Engine::dump_flight_recorder(uint64_t sequence, const LinkError& error,
                                         bool joined) const {
  FlightRecorder& recorder = FlightRecorder::get();
  // abort() is the caller's own doing: nothing to explain. (A peer's report that it gave up
  // also comes as Aborted.)
  if (!recorder.enabled() || aborted_) return "";
  std::string text;
  try {
    text = "; this rank's flight recorder: " + recorder.write_dump();
    // Without the agreement check, nothing says which collective the awaited ranks are in.
    if (error.kind() == LinkError::Kind::Timeout && agree_) {
      for (int rank : error.awaited()) {
        text += "; what rank " + std::to_string(rank) + " last reported: " +
                recorder.write_stand_in(recorded_as_, rank, sequence, joined);
      }
    }
  } catch (const std::exception& e) {
    text += "; " + std::string(e.what());
  }
  return text;
}

c10::intrusive_ptr<Work> Engine::queue(const OpInfo& op, std::chrono::milliseconds timeout,
                                       bool async_op, TensorsFn inputs,
                                       std::vector<at::Tensor> outputs, Signature signature,
                                       OpFn run, CopyBack copy_back) {
  if (timeout == c10d::kUnsetTimeout) timeout = group_.timeout;
  const uint64_t sequence = collectives_submitted_++;
  // What each rank sends or receives bounds a small op: the smaller side of an all-gather or a
  // reduce-scatter, not the whole.
  const bool caller_runs =
      !async_op ||
      (deferred_async_max_bytes_ > 0 &&
       std::min(total_bytes(outputs), total_bytes(inputs())) <= deferred_async_max_bytes_);
  auto work = start(op, sequence, /*p2p=*/false, async_op, caller_runs, timeout, inputs,
                    std::move(outputs));
  // The caller waits at once: when the group is idle, run it now, on this thread. (Coalesced ops
  // wait for end_coalescing, when the runtime may batch them.)
  bool succeeded = false;
  if (!async_op && !coalescing_ && executor_.run_now([&] {
        succeeded = execute(op, sequence, timeout, signature, run, copy_back, *work);
      })) {
    // A failed op's tensors stay until the next op, as a queued op's do: a peer that was stopped
    // mid-copy may still read them when it resumes, and must find the reason, not freed memory.
    if (!succeeded) executor_.keep([run = std::move(run), copy_back = std::move(copy_back)] {});
    return work;
  }
  auto task = [this, op, sequence, timeout, signature = std::move(signature),
               run = std::move(run), copy_back = std::move(copy_back), work]() mutable {
    execute(op, sequence, timeout, signature, run, copy_back, *work);
  };
  // Must not touch the engine, which may be gone by then.
  auto cancel = [label = op.label, sequence, group = group_description_, work] {
    finish_op(*work,
              backend_error(op_prefix(label, sequence, *group) + "not run, the backend was " +
                            "shut down from inside an earlier op's completion"),
              -1);
  };
  try {
    work->ticket_ = executor_.submit(std::move(task), std::move(cancel), caller_runs);
  } catch (const std::runtime_error& e) {
    TORCH_CHECK(false, op.label, ": ", e.what());
  }
  collect(work);
  return work;
}

bool Engine::execute(OpInfo op, uint64_t sequence, std::chrono::milliseconds timeout,
                     Signature& signature, const OpFn& run, const CopyBack& copy_back,
                     Work& work) {
  if (!broken_.empty()) {
    finish_op(work,
              backend_error(describe_op(op.label, sequence) +
                            "not run, the group failed earlier: " + broken_),
              -1);
    return false;
  }
  work.started();
  OpContext ctx{group_.rank, group_.size, op.label, sequence, Clock::now() + timeout, nullptr,
                nullptr, &aborted_};
  std::optional<Agreement> agreement;
  try {
    if (agree_) {
      signature.op = op_name(op.label);
      signature.sequence = sequence;
      agreement.emplace(signature, group_.rank, group_.size,
                        [&](const void* record, void* everyone, size_t bytes) {
                          runtime_.exchange_signatures(ctx, record, everyone, bytes);
                        });
      // A barrier's agreement round is the barrier.
      if (carries_signatures_ && op.type != c10d::OpType::BARRIER) {
        ctx.agreement = &*agreement;
      } else {
        agreement->settle();
      }
    }
    ctx.all_ranks_entered = agreement && agreement->settled();
    run(ctx);
    if (agreement && !agreement->settled()) agreement->settle();
    copy_back.run();
  } catch (const LinkError& e) {
    // Every rank sent its signature: the ranks are all in this op.
    const bool joined = !agreement || agreement->joined();
    // A failed exchange leaves the links mid-message: nothing after it can be trusted.
    broken_ = runtime_.gave_up(
        describe_op(op.label, sequence) + failure_text(std::current_exception(), timeout), e);
    work.failed();  // before the dump, which shows it so
    finish_op(work, backend_error(broken_ + dump_flight_recorder(sequence, e, joined)), -1);
    return false;
  } catch (...) {
    // Failed before or after its messages (a mismatch, writing the result back): the links
    // are fine.
    finish_op(work,
              backend_error(describe_op(op.label, sequence) +
                            failure_text(std::current_exception(), timeout)),
              -1);
    return false;
  }
  finish_op(work, nullptr, -1, completion_hook_.get());
  return true;
}

c10::intrusive_ptr<Work> Engine::post(const OpInfo& op, std::chrono::milliseconds timeout,
                                      TensorsFn inputs, std::vector<at::Tensor> outputs,
                                      OpFn run, CopyBack copy_back) {
  if (timeout == c10d::kUnsetTimeout) timeout = group_.timeout;
  const uint64_t sequence = p2p_submitted_++;
  auto work = start(op, sequence, /*p2p=*/true, /*async_op=*/true, /*deferred=*/false, timeout,
                    inputs, std::move(outputs));
  work->started();
  std::string prefix = describe_op(op.label, sequence);
  // May run after the engine is gone (from a runtime's own thread): holds what it needs.
  auto done = [prefix, timeout, work, hook = completion_hook_,
               copy_back = std::move(copy_back)](std::exception_ptr error, int source) {
    if (!error) {
      try {
        copy_back.run();
      } catch (...) {
        error = std::current_exception();
      }
    }
    finish_op(*work, error ? backend_error(prefix + failure_text(error, timeout)) : nullptr,
              source, hook.get());
  };
  OpContext ctx{group_.rank, group_.size, op.label, sequence, Clock::now() + timeout, done,
                &completions_, &aborted_};
  try {
    run(ctx);
  } catch (...) {
    done(std::current_exception(), -1);
  }
  work->progress_ = std::move(ctx.progress_while_waiting);
  work->wait_without_progress_ = std::move(ctx.wait_without_progress);
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

void Engine::set_completion_hook(CompletionHook::Fn hook) {
  completion_hook_->set(std::move(hook), group_.backend);
}

void Engine::enable_timing() { timing_ = true; }

void Engine::monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  if (timeout == c10d::kUnsetTimeout) timeout = group_.timeout;
  const uint64_t index = monitored_barriers_++;
  kit::monitored_barrier(
      store_, group_.rank, group_.size, timeout, wait_all_ranks, index,
      op_in_group(group_.backend + ".monitored_barrier", index, *group_description_));
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
