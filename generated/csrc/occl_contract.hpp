// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
//
// The runtime contract of the occl backend: everything its hand-written runtime
// implements. The runtime derives a class from Runtime, overriding every op (the compiler names
// the ones it lacks), and defines connect(). The generated backend checks each op's arguments
// and hands the kit's engine a call of the op's function here; the kit (occl_kit/engine.hpp)
// queues it, checks that the ranks agree on it, bounds it by its timeout and completes its Work.
#pragma once

#include "occl_kit/engine.hpp"
#include "occl_kit/subgroup.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pybind11 {
class module_;
}

namespace occl::runtime {

// Built by the generated backend from its Options (spec: backend.options).
struct Config {
  std::chrono::milliseconds timeout;  // for ops whose options leave it unset
  std::string group_name;
  std::vector<uint64_t> global_ranks_in_group;  // empty for the default group
  std::string bind_address;  // Address this rank's listening socket binds to; peers connect to it.
};

// One function per op of the spec (its `runtime:` key), with the op's arguments. Queued ops run
// in issue order on the group's worker (or on the thread that waits for them); posted ones on
// the caller's thread, completing through ctx.done or ctx.complete_when.
class Runtime : public ::occl::kit::Runtime {
 public:
  // broadcast: Copies the root rank's tensor into the tensor of every other rank.
  virtual void broadcast(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) = 0;
  // allreduce: Reduces the tensor across all ranks in place; every rank ends with the result. A sparse COO tensor is summed as allreduce_sparse does (torch.distributed.all_reduce sends sparse tensors here).
  virtual void allreduce(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) = 0;
  // allgather: Every rank receives every rank's input, in rank order, in a list of outputs.
  virtual void allgather(::occl::kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors, const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) = 0;
  // _allgather_base: Gathers every rank's input into one output tensor of world_size times its size.
  virtual void allgather_base(::occl::kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) = 0;
  // reduce_scatter: Reduces list entry i across ranks and leaves the result on rank i.
  virtual void reduce_scatter(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors, const std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) = 0;
  // _reduce_scatter_base: Reduces one input of world_size chunks across ranks; rank i keeps chunk i.
  virtual void reduce_scatter_base(::occl::kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) = 0;
  // barrier: Returns on every rank only after every rank has entered it.
  virtual void barrier(::occl::kit::OpContext& ctx, const c10d::BarrierOptions& opts) = 0;
  // allreduce_coalesced: Allreduces several tensors of one dtype as one operation.
  virtual void allreduce_coalesced(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) = 0;
  // allreduce_sparse: Sums a sparse COO tensor across all ranks in place (indices of all ranks, duplicates summed).
  virtual void allreduce_sparse(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) = 0;
  // reduce: Reduces the tensor across all ranks into the root's tensor; other ranks' tensors are left as they were.
  virtual void reduce(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) = 0;
  // allgather_coalesced: Allgathers several inputs at once; output_tensor_lists[r][i] receives rank r's input i.
  virtual void allgather_coalesced(::occl::kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensor_lists, const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) = 0;
  // allgather_into_tensor_coalesced: Several _allgather_base operations at once; outputs[i] gathers inputs[i].
  virtual void allgather_into_tensor_coalesced(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) = 0;
  // gather: The root receives every rank's input, in rank order; other ranks pass no outputs.
  virtual void gather(::occl::kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors, const std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) = 0;
  // scatter: Rank r receives the root's input r; other ranks pass no inputs.
  virtual void scatter(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors, const std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) = 0;
  // reduce_scatter_tensor_coalesced: Several _reduce_scatter_base operations at once; outputs[i] receives its block of inputs[i].
  virtual void reduce_scatter_tensor_coalesced(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) = 0;
  // alltoall_base: Rank r sends slice j of its input (along dim 0) to rank j and receives slice r of every rank's input; splits may be uneven.
  virtual void alltoall_base(::occl::kit::OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) = 0;
  // alltoall: Rank r sends input_tensors[j] to rank j and receives rank j's input_tensors[r] into output_tensors[j]; sizes may differ per peer.
  virtual void alltoall(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors, const std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions& opts) = 0;
  // send: Sends the tensor to dst_rank; a recv on dst_rank with the same tag receives it.
  virtual void send(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank, int tag) = 0;
  // recv: Receives the tensor src_rank sends with the same tag; messages of one sender and tag arrive in order.
  virtual void recv(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank, int tag) = 0;
  // recvAnysource: Receives the first tensor any rank sends with the tag; the Work reports the sender's rank.
  virtual void recv_anysource(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int tag) = 0;

  // The runtime of `subgroup` (capability supportsSplitting), formed from what this group has
  // rather than through a store; nullptr on ranks not in it. Every rank of this group calls it,
  // its splits in the same order.
  virtual std::unique_ptr<Runtime> split(const ::occl::kit::Subgroup& subgroup,
                                         const Config& config) = 0;

  // A 1-D tensor of `numel` (>= 0) elements with `options`, on a device the backend accepts,
  // for the group's collectives (capability supportsTensorAlloc): c10d's allocateTensor, which
  // FSDP2 calls for its all-gather and reduce-scatter buffers on every step. Any thread may
  // call it, and free what it returns.
  virtual at::Tensor allocate_tensor(int64_t numel, const at::TensorOptions& options) = 0;
};

// Connects to every other rank of the group through `store` before it returns.
std::unique_ptr<Runtime> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 const Config& config);

// Adds what else the runtime offers to the Python module (spec: backend.runtime.python_extensions).
void bind_extensions(pybind11::module_& module);

}  // namespace occl::runtime
