// The contract between the generated backend (generated/) and the hand-written runtime.
//
// The generated c10d::Backend subclass validates arguments, builds a Config from its Options,
// owns one Runtime, and for every op submits a call of the op's runtime function (declared below,
// one per spec entry). Everything here runs off the caller's thread, in issue order.
#pragma once

#include "transport/socket.hpp"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace occl::transport {
class Mesh;
}

namespace occl::runtime {

class Executor;

// Built by the generated backend from its Options (spec: backend.options).
struct Config {
  std::chrono::milliseconds timeout;  // for ops whose options leave it unset
  std::string group_name;
  std::vector<uint64_t> global_ranks_in_group;  // empty for the default group
  std::string bind_address;
  std::string group_id;
};

// What an op's runtime function gets besides its arguments.
struct OpContext {
  transport::Mesh& mesh;
  int rank;
  int size;
  transport::Deadline deadline;
};

class Runtime {
 public:
  using OpFn = std::function<void(OpContext&)>;
  using DoneFn = std::function<void(std::exception_ptr)>;

  // Connects to every other rank of the group (through `store`) before returning.
  Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config);
  ~Runtime();

  // Queues `run`; `done` is called on the worker with nullptr or the op's error. `label` names
  // the op in errors ("occl.allreduce"); `timeout` may be c10d::kUnsetTimeout.
  void submit(const char* label, std::chrono::milliseconds timeout, OpFn run, DoneFn done);

  // Lets queued ops finish (each within its own timeout), then stops the worker. Idempotent.
  void shutdown();
  // Fails the running op and every queued one at once, then stops the worker. Idempotent.
  void abort();

  const Config& config() const { return config_; }

 private:
  void execute(const char* label, uint64_t sequence, std::chrono::milliseconds timeout,
               const OpFn& run, const DoneFn& done);
  std::string describe_group() const;

  int rank_;
  int size_;
  Config config_;
  std::unique_ptr<transport::Mesh> mesh_;
  std::atomic<uint64_t> next_sequence_{0};  // ops submitted so far, names them in errors
  std::string broken_;               // first transport failure; later ops fail fast with it
  std::unique_ptr<Executor> executor_;
};

// ---- Reduce-op support, used by the spec's reduce_op_supports_dtype check -------------------
const char* reduce_op_name(const c10d::ReduceOp& op);
// nullptr when the kernels implement `op` for `dtype`, else the reason, for the error message.
const char* reduce_op_unsupported_reason(const c10d::ReduceOp& op, at::ScalarType dtype);

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

}  // namespace occl::runtime
