// The engine between a generated c10d::Backend and the runtime it was generated for.
//
// The generated backend checks an op's arguments, fills in its Signature, and hands the engine a
// call of the runtime's function for the op. The engine numbers the op, creates its Work, runs it
// as its `dispatch` says, checks first that every rank runs the same collective alike, names the
// op, its sequence number and the group in every error, bounds it by its timeout, and fails
// every later op of the group at once after a link failure.
//   queued (collectives)  in issue order on the group's worker thread, or on the thread that
//                         waits for the op when the caller said it waits at once or the op is
//                         small (Runtime::deferred_async_max_bytes, Executor); a blocking op
//                         issued while the group is idle runs at once, inside the call
//   posted (p2p)          at once on the caller's thread; the runtime completes the op through
//                         OpContext::done or hands a request to the completion engine
#pragma once

#include "occl_kit/completion.hpp"
#include "occl_kit/errors.hpp"
#include "occl_kit/executor.hpp"
#include "occl_kit/host_tensors.hpp"
#include "occl_kit/signature.hpp"
#include "occl_kit/telemetry.hpp"
#include "occl_kit/work.hpp"

#include <c10/util/FunctionRef.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Backend;
}

namespace occl::kit {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Called once when an op ends: nullptr or its error, and the rank a received message came from
// (-1 for anything but receives from any source).
using DoneFn = std::function<void(std::exception_ptr error, int source_rank)>;

// What the generated code says about an op: static, one per op.
struct OpInfo {
  const char* label;            // "occl.allreduce": names the op in errors
  const char* profiling_title;  // "occl:allreduce": names its Work in the profiler
  c10d::OpType type;
};

// What an op's runtime function gets besides its arguments.
struct OpContext {
  int rank;
  int size;
  const char* label;
  uint64_t sequence;  // the op's index among the group's collectives (or its p2p ops)
  Deadline deadline;  // every wait of the op ends by then
  // Posted ops only: call exactly once, or hand the op to complete_when() instead.
  DoneFn done;
  // Posted ops only: completes the op when `test` says its request is done (see completion.hpp).
  void complete_when(CompletionEngine::TestFn test) const;
  // Queued ops over a library's request: returns once `done` returns true, testing it as the
  // completion engine does; throws LinkError(Timeout, what) at the deadline and
  // LinkError(Aborted) once the group is aborted. A request left in flight is the caller's.
  void wait_until(const std::function<bool()>& done, const std::string& what) const;

  CompletionEngine* completions = nullptr;
  const std::atomic<bool>* aborted = nullptr;
  // Posted ops only, optional: how a thread about to wait for the op may move it (work.hpp),
  // for a runtime whose own thread completes posted ops: waking that thread and then the waiter
  // costs more than a short message. It must stay callable after the runtime is gone.
  WaiterProgress progress_while_waiting;
  // Posted ops with progress_while_waiting only, optional: called when a thread waits for the op
  // without calling progress_while_waiting (it polls isCompleted, or waits on getFuture). A
  // runtime may leave a posted op to its waiter's progress until then, and hand it to its own
  // thread here; progress_while_waiting returning before the op is done is a cue of its own.
  std::function<void()> wait_without_progress;
  // Queued ops: every rank of the group has entered this op. The engine exchanged their
  // signatures before running it, which is itself a barrier: a barrier op has nothing left to do.
  bool all_ranks_entered = false;
  // Queued ops but barriers, when the runtime carries signatures (Runtime::carries_signatures):
  // the op's agreement check, which it settles or carries before it uses anything a peer sent
  // (signature.hpp). The engine settles it after an op that left it alone (it sent nothing).
  Agreement* agreement = nullptr;
};

// What the engine needs of a runtime beyond its ops. The generated contract header declares the
// runtime's class, one pure virtual function per op, deriving from this.
class Runtime {
 public:
  virtual ~Runtime() = default;
  // Moves signature records between the ranks for the agreement check (signature.hpp's
  // ExchangeFn, bounded by ctx.deadline). Needed when the spec turns agreement on.
  virtual void exchange_signatures(OpContext& ctx, const void* mine, void* everyone, size_t bytes);
  // Agreement on, the runtime may still skip it (a knob to measure its cost).
  virtual bool agreement_enabled() const { return true; }
  // Whether the runtime's ops carry their signature records in their own messages
  // (OpContext::agreement) instead of a round of their own before the op runs: a small op then
  // waits for its peers once, not twice. exchange_signatures must read what such an op sends a
  // rank that runs another collective, and such an op what exchange_signatures sends.
  virtual bool carries_signatures() const { return false; }
  // An asynchronous collective whose inputs or outputs hold at most this many bytes (the smaller
  // side: an all-gather's input, a reduce-scatter's output) does not wake the group's worker when
  // issued: the thread that waits for it runs it, as for a blocking call.
  // Where waking a thread costs more than such an op (a CPU transport), that keeps async_op and
  // the functional collectives as fast as the blocking call. It still starts at once when
  // getFuture() or isCompleted() is asked (DDP's comm hooks), when a later op wakes the worker,
  // and at the latest after Executor::kLookAgain. 0: every asynchronous op starts at once (an
  // accelerator's library, which only enqueues it).
  virtual size_t deferred_async_max_bytes() const { return 0; }
  // An op failed with `error`, which broke the links; `failure` is its error text. Returns the
  // text the op and every later one fail with (a runtime may tell the other ranks, and add what
  // they report).
  virtual std::string gave_up(const std::string& failure, const LinkError& error);
  // Coalescing hooks (c10d startCoalescing/endCoalescing): the ops issued between the two are
  // the ones a library may batch; their Works complete as one.
  virtual void start_coalescing() {}
  virtual void end_coalescing() {}
  // The queue has drained (shutdown): release the links. Called once.
  virtual void close() {}
  // Fail whatever transfers are in flight, at once; may come from any thread, also after
  // close() (point-to-point ops may still be in flight then).
  virtual void abort() {}
};

// Who the group is, for errors: "group 0 (rank 1 of 2; global ranks 2 3)".
struct GroupInfo {
  std::string backend;  // "occl"
  std::string name;
  int rank;
  int size;
  std::vector<uint64_t> global_ranks;  // empty for the default group
  std::chrono::milliseconds timeout;   // for ops whose options leave theirs unset
};

// "group 0 (rank 1 of 2; global ranks 2 3)": how errors name a group.
std::string describe_group(const std::string& name, int rank, int size,
                           const std::vector<uint64_t>& global_ranks);

class Engine {
 public:
  using OpFn = std::function<void(OpContext&)>;
  // Called, if at all, during the call it is passed to.
  using TensorsFn = c10::function_ref<std::vector<at::Tensor>()>;

  // `agree`: the spec asks for the agreement check (backend.runtime.agreement); the runtime
  // may still turn it off. `backend`: the c10d::Backend it runs ops for (the profiler's records
  // name its group uid and description, which torch sets after construction). `store`: the
  // group's, where monitored barriers meet.
  Engine(Runtime& runtime, const c10d::Backend& backend, GroupInfo group, bool agree,
         c10::intrusive_ptr<c10d::Store> store);
  ~Engine();  // same as shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // A collective: runs `run` after every op queued before it, once every rank's `signature`
  // agreed. `timeout` may be c10d::kUnsetTimeout. `async_op` false: the caller waits at once.
  // `outputs`: what the op writes (its future holds them); `inputs`: what it reads, asked for
  // only while the flight recorder, the profiler or OCCL_DEBUG=TRACE wants them. `copy_back` (host_tensors.hpp)
  // runs once `run` succeeded, before the Work completes.
  c10::intrusive_ptr<Work> queue(const OpInfo& op, std::chrono::milliseconds timeout,
                                 bool async_op, TensorsFn inputs, std::vector<at::Tensor> outputs,
                                 Signature signature, OpFn run, CopyBack copy_back = {});
  // A point-to-point op: runs `run` now; the runtime completes it through ctx.
  c10::intrusive_ptr<Work> post(const OpInfo& op, std::chrono::milliseconds timeout,
                                TensorsFn inputs, std::vector<at::Tensor> outputs, OpFn run,
                                CopyBack copy_back = {});

  // Between these, every op's Work is collected; end_coalescing returns one Work for all.
  void start_coalescing();
  c10::intrusive_ptr<Work> end_coalescing();

  // The collectives issued so far: torch's sequence number for the group
  // (getSequenceNumberForGroup), the same on every rank that issued the same collectives. It
  // starts at 0 (setSequenceNumberForGroup has nothing to agree on).
  uint64_t sequence_number() const { return collectives_submitted_; }
  // torch's registerOnCompletionHook: `hook` gets every op that completed from now on
  // (telemetry.hpp), with its type, sequence number, start, end and duration.
  void set_completion_hook(CompletionHook::Fn hook);
  // torch's enableCollectivesTiming: every op issued from now on knows its duration
  // (Work::getDuration).
  void enable_timing();
  // torch's monitoredBarrier, through the group's store (rendezvous.hpp); `timeout` may be
  // c10d::kUnsetTimeout.
  void monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks);

  // Lets queued ops finish (each within its own timeout), stops the worker and closes the
  // runtime's links. Idempotent. Called from inside an op (its completion), it fails the ops
  // queued after that one instead of running them.
  void shutdown();
  // Fails the running op and every queued one at once, then shuts down. Idempotent.
  void abort();

  const std::string& group_description() const { return *group_description_; }

 private:
  // Runs a queued op and completes its Work; returns whether it succeeded.
  bool execute(OpInfo op, uint64_t sequence, std::chrono::milliseconds timeout,
               Signature& signature, const OpFn& run, const CopyBack& copy_back, Work& work);
  // A new Work for op number `sequence` (timed when timing is on, or a hook is set), logged at
  // TRACE (`deferred`: an async op the worker was not woken for) and recorded for the profiler
  // when one listens.
  // A collective's Work is also recorded in the flight recorder (flight_recorder.hpp).
  c10::intrusive_ptr<Work> start(const OpInfo& op, uint64_t sequence, bool p2p, bool async_op,
                                 bool deferred, std::chrono::milliseconds timeout,
                                 TensorsFn inputs, std::vector<at::Tensor> outputs);
  // Writes the flight recorder's dump after the group's first link failure (not after abort()),
  // in collective `sequence`, and after a timeout, what the awaited ranks last reported
  // (`joined`: they had sent their signatures for it). What the error adds about it.
  std::string dump_flight_recorder(uint64_t sequence, const LinkError& error, bool joined) const;
  void collect(const c10::intrusive_ptr<Work>& work);
  std::string describe_op(const char* label, uint64_t sequence) const;

  Runtime& runtime_;
  const c10d::Backend& backend_;
  GroupInfo group_;
  const bool agree_;
  const bool carries_signatures_;  // the runtime's, asked once
  const size_t deferred_async_max_bytes_;  // the runtime's, asked once
  // "group G (rank r of n; ...)", shared with cancelled ops, which may outlive the engine.
  std::shared_ptr<const std::string> group_description_;
  // Ops submitted so far, each kind counted on its own: they name ops in errors, and collectives
  // must have the same numbers on every rank.
  std::atomic<uint64_t> collectives_submitted_{0};
  std::atomic<uint64_t> p2p_submitted_{0};
  std::string broken_;  // the first link failure; later ops fail fast with it
  const std::string coalesced_title_;  // "occl:coalesced"
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<Work>> coalesced_;
  std::atomic<bool> closed_{false};  // runtime_.close() was called (shutdown may come twice)
  std::atomic<bool> aborted_{false};  // abort() was called: OpContext::wait_until stops
  std::atomic<bool> timing_{false};   // enable_timing() was called
  // Shared with completions that may run after the engine is gone (a runtime's p2p thread).
  std::shared_ptr<CompletionHook> completion_hook_ = std::make_shared<CompletionHook>();
  const DebugLevel debug_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::atomic<uint64_t> monitored_barriers_{0};
  const size_t recorded_as_;  // the group's id in the flight recorder  // the same on every rank: each calls them in order
  CompletionEngine completions_;
  Executor executor_;  // last: destroyed (stopped) first
};

}  // namespace occl::kit
