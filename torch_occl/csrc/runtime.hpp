// The contract between the generated backend (generated/) and the hand-written runtime.
//
// The generated c10d::Backend subclass validates arguments, builds a Config from its Options,
// owns one Runtime, and for every op submits a call of the op's runtime function (declared below,
// one per spec entry). Collectives run in issue order, on the group's worker thread or on a
// thread that waits for them (see Executor); point-to-point ops are handed to the p2p engine.
#pragma once

#include "transport/socket.hpp"
#include "work/executor.hpp"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pybind11 {
class module_;
}

namespace occl::transport {
class Mesh;
class P2PEngine;
}

namespace occl::runtime {

// Lets a thread about to wait for a queued op run the op itself (see Executor).
using Ticket = Executor::Ticket;

// Built by the generated backend from its Options (spec: backend.options).
struct Config {
  std::chrono::milliseconds timeout;  // for ops whose options leave it unset
  std::string group_name;
  std::vector<uint64_t> global_ranks_in_group;  // empty for the default group
  std::string bind_address;
  std::string group_id;
};

// Called once when an op ends: nullptr or its error, and the rank a received message came from
// (-1 for anything but receives).
using DoneFn = std::function<void(std::exception_ptr, int source_rank)>;

// How an op runs (spec: an op's `dispatch`).
enum class Dispatch {
  Queued,  // collectives: after every op issued before it, on the worker (or a waiting thread)
  Posted,  // at once on the caller's thread, handing its completion to the p2p engine
};

// What an op's runtime function gets besides its arguments.
struct OpContext {
  transport::Mesh& mesh;        // collective links, used by queued ops
  transport::P2PEngine& p2p;    // point-to-point links, used by posted ops
  int rank;
  int size;
  const char* label;            // "occl.allreduce"
  uint64_t sequence;            // the op's index among the group's collectives (or p2p ops)
  transport::Deadline deadline;
  DoneFn done;  // posted ops only: must end up called exactly once (the engine calls it)
};

class Runtime {
 public:
  using OpFn = std::function<void(OpContext&)>;

  // Connects to every other rank of the group (through `store`) before returning.
  Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config);
  ~Runtime();

  // Runs `run` as `dispatch` says; `done` gets nullptr or the op's error (a DistBackendError
  // naming the op). `label` names the op in errors ("occl.allreduce"); `timeout` may be
  // c10d::kUnsetTimeout. `caller_waits`: the caller waits for the op at once, and runs it itself
  // through the returned ticket when it is next (Executor::submit); empty for posted ops.
  Ticket submit(Dispatch dispatch, const char* label, std::chrono::milliseconds timeout,
                bool caller_waits, OpFn run, DoneFn done);

  // Lets queued ops finish (each within its own timeout), stops the worker and closes the
  // collective links. Idempotent. Called from inside an op (its completion), it fails the ops
  // queued after that one instead of running them.
  void shutdown();
  // Fails the running op and every queued one at once, then stops the worker. Idempotent.
  void abort();

  const Config& config() const { return config_; }

 private:
  void execute(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
               const OpFn& run, const DoneFn& done);
  void post(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
            const OpFn& run, DoneFn done);
  std::string describe_group() const;
  std::string make_group_description() const;  // once, from the fields above it
  std::string describe_op(const char* label, uint64_t sequence) const;
  std::string give_up(const std::string& failure, const transport::TransportError& error);

  int rank_;
  int size_;
  Config config_;
  // "group G (rank r of n; ...)", shared with cancelled ops, which may outlive the runtime.
  std::shared_ptr<const std::string> group_description_;
  std::mutex mesh_mutex_;  // abort() may come from any thread while shutdown() releases mesh_
  // Shared with the p2p engine's thread, which hands it the other ranks' failure reports.
  std::shared_ptr<transport::Mesh> mesh_;
  std::unique_ptr<transport::P2PEngine> p2p_;
  // Ops submitted so far, each kind counted on its own: they name ops in errors, and collectives
  // must have the same numbers on every rank (see transport::Collective).
  std::atomic<uint64_t> collectives_submitted_{0};
  std::atomic<uint64_t> p2p_submitted_{0};
  std::string broken_;               // first transport failure; later ops fail fast with it
  std::unique_ptr<Executor> executor_;
};

// ---- Reduce-op support, used by the spec's reduce_op_supports_dtype check -------------------
const char* reduce_op_name(const c10d::ReduceOp& op);

// ---- Output tensors, used by the spec's writable check --------------------------------------
// True when several elements of `tensor` share memory (e.g. an expand()ed view): results
// cannot be written into it.
bool has_overlapping_elements(const at::Tensor& tensor);

// ---- Split sizes, used by the spec's split_sizes check ---------------------------------------
// Empty when `sizes` splits `tensor` along dim 0 into world_size parts (empty `sizes`: equal
// parts), else why not.
std::string split_sizes_unfit_reason(const std::vector<int64_t>& sizes, const at::Tensor& tensor,
                                     int world_size);
// The bytes of `tensor` that rank `index` sends or receives, for sizes that fit.
size_t slice_bytes(const std::vector<int64_t>& split_sizes, const at::Tensor& tensor, int index,
                   int world_size);

// ---- Python: what the module offers beyond the backend ----------------------------------------
// The spec's backend.runtime.python_extensions: the generated bindings call it last. It adds
// what torch_occl.shared_empty needs; defined in shared_tensors.cpp.
void bind_extensions(pybind11::module_& module);

// ---- One function per spec op (`runtime:` key) ----------------------------------------------
void broadcast(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::BroadcastOptions& opts);
void allreduce(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::AllreduceOptions& opts);
void allgather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
               const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts);
void allgather_base(OpContext& ctx, const at::Tensor& output_tensor,
                    const at::Tensor& input_tensor, const c10d::AllgatherOptions& opts);
void reduce_scatter(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                    const std::vector<std::vector<at::Tensor>>& input_tensors,
                    const c10d::ReduceScatterOptions& opts);
void reduce_scatter_base(OpContext& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts);
void barrier(OpContext& ctx, const c10d::BarrierOptions& opts);
void allreduce_coalesced(OpContext& ctx, const std::vector<at::Tensor>& tensors,
                         const c10d::AllreduceCoalescedOptions& opts);
void allreduce_sparse(OpContext& ctx, const std::vector<at::Tensor>& tensors,
                      const c10d::AllreduceOptions& opts);
void reduce(OpContext& ctx, const std::vector<at::Tensor>& tensors,
            const c10d::ReduceOptions& opts);
void allgather_coalesced(OpContext& ctx,
                         const std::vector<std::vector<at::Tensor>>& output_tensor_lists,
                         const std::vector<at::Tensor>& input_tensors,
                         const c10d::AllgatherOptions& opts);
void allgather_into_tensor_coalesced(OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions& opts);
void gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
            const std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts);
void scatter(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
             const std::vector<std::vector<at::Tensor>>& input_tensors,
             const c10d::ScatterOptions& opts);
void reduce_scatter_tensor_coalesced(OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::ReduceScatterOptions& opts);
void alltoall_base(OpContext& ctx, const at::Tensor& output_tensor,
                   const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes,
                   const std::vector<int64_t>& input_split_sizes,
                   const c10d::AllToAllOptions& opts);
void alltoall(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
              const std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions& opts);
// Posted: they hand ctx.done to the p2p engine.
void send(OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank, int tag);
void recv(OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank, int tag);
void recv_anysource(OpContext& ctx, const std::vector<at::Tensor>& tensors, int tag);

}  // namespace occl::runtime
