// The tin runtime: what the backend generated from spec/tin.yaml calls to do the work.
//
// It implements the generator's runtime contract (the names below) as simply as it can: every op
// runs at once, on the thread that issues it, and moves its data through the group's
// c10d::Store. Each op has a sequence number, the same on every rank because every rank issues
// the group's ops in the same order; rank r publishes its input under "<key_prefix>/<seq>/<r>"
// and reads the others' keys. Keys are never deleted: this is a fixture, not a transport.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace tin::runtime {

// Built by the generated backend from its Options: torch's fields, then the spec's options.
struct Config {
  std::chrono::milliseconds timeout;  // for ops whose options leave it unset
  std::string group_name;
  std::vector<uint64_t> global_ranks_in_group;
  std::string key_prefix;
};

// The spec's ops are all `dispatch: queued` (the default); tin runs them at once all the same.
enum class Dispatch { Queued };

// Called once when an op ends: nullptr or its error, and -1 (tin has no receive from any source).
using DoneFn = std::function<void(std::exception_ptr, int source_rank)>;

// What the generated Work holds to run a queued op on a waiting thread, or to wake the worker
// for it. tin has neither worker nor queue: by the time a Work exists its op has ended.
struct Ticket {
  bool run_if_next() const { return false; }
  void wake_worker() const {}
};

// What an op's function gets besides its arguments.
struct OpContext {
  c10d::Store& store;
  int rank;
  int size;
  std::string key;                    // "<key_prefix>/<seq>": its ranks' keys are key + "/<r>"
  std::chrono::milliseconds timeout;  // how long it waits for the other ranks' keys
};

class Runtime {
 public:
  using OpFn = std::function<void(OpContext&)>;

  Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config);

  // Runs `run` at once, then calls `done` with nullptr or a DistBackendError naming the op and
  // the group. `timeout` may be c10d::kUnsetTimeout (then Config::timeout applies).
  Ticket submit(Dispatch dispatch, const char* label, std::chrono::milliseconds timeout,
                bool caller_waits, OpFn run, DoneFn done);

  // Both make later ops fail; no op is ever in flight for them to stop.
  void shutdown();
  void abort();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  Config config_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<bool> stopped_{false};
};

// One function per spec op (its `runtime:` key), with the op's arguments.
void all_gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
                const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts);
void barrier(OpContext& ctx, const c10d::BarrierOptions& opts);
void gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& outputs,
            const std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options);

}  // namespace tin::runtime
