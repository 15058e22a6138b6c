// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
//
// The occl c10d::Backend: argument checks and glue, generated. The kit's engine
// runs each op (occl_kit/engine.hpp) through the runtime contract in occl_contract.hpp.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "occl_kit/engine.hpp"
#include "occl_kit/shrink.hpp"
#include "occl_contract.hpp"

namespace occl {

class ProcessGroupOCCL : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    Options();
    // Address this rank's listening socket binds to; peers connect to it.
    std::string bind_address = "127.0.0.1";
  };

  // Connects to every other rank of the group through `store` before it returns.
  ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options);
  // Runs over `runtime`, connected already (split() makes one).
  ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options,
      std::unique_ptr<::occl::runtime::Runtime> runtime);
  ~ProcessGroupOCCL() override;

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsCoalescing() const override;
  bool supportsSplitting() const override;
  bool supportsTimeEstimation() const override;
  bool supportsShrinking() const override;
  void shutdown() override;
  void abort() override;
  // What torch's tools read (occl_kit/telemetry.hpp): the group's sequence number, the collectives
  // issued so far from 0 (TORCH_DISTRIBUTED_DEBUG=DETAIL compares it across ranks); a hook called
  // with every op that completes; every op's duration; a barrier that names absent ranks.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void registerOnCompletionHook(
      std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
  void enableCollectivesTiming() override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // Between these, every op's Work is collected; endCoalescing returns one Work for all of them.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // The subgroup of `ranks` (ranks of this group), formed by the runtime's split() from this
  // group's links; nullptr on the ranks not in it. Every rank of this group calls it.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
      const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // The group without `ranks_to_exclude` (ranks of this group, which may be dead): the survivors
  // connect afresh through this group's store, under a prefix of this shrink's own, so nothing
  // of the group's links or shared memory carries over. Only survivors call it, all in the same
  // order. SHRINK_ABORT (torch's flag 1) first fails this group's ops in flight.
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude,
      int shrink_flags, const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) override;
  // Buffers for the group's collectives from the runtime's allocate_tensor (FSDP2 asks for its
  // all-gather and reduce-scatter buffers here when told to), for every device the backend
  // accepts: a 1-D tensor of `size` elements, after checking the size and the device.
  bool supportsTensorAlloc(c10::DeviceIndex deviceIdx) override;
  at::Tensor allocateTensor(long size, at::TensorOptions options = {}) override;

  // Copies the root rank's tensor into the tensor of every other rank.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;

  // Reduces the tensor across all ranks in place; every rank ends with the result. A sparse COO tensor is summed as allreduce_sparse does (torch.distributed.all_reduce sends sparse tensors here).
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;

  // Every rank receives every rank's input, in rank order, in a list of outputs.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) override;

  // Gathers every rank's input into one output tensor of world_size times its size.
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) override;

  // Reduces list entry i across ranks and leaves the result on rank i.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) override;

  // Reduces one input of world_size chunks across ranks; rank i keeps chunk i.
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) override;

  // Returns on every rank only after every rank has entered it.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Allreduces several tensors of one dtype as one operation.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;

  // Sums a sparse COO tensor across all ranks in place (indices of all ranks, duplicates summed).
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;

  // Reduces the tensor across all ranks into the root's tensor; other ranks' tensors are left as they were.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;

  // Allgathers several inputs at once; output_tensor_lists[r][i] receives rank r's input i.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_tensor_lists, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) override;

  // Several _allgather_base operations at once; outputs[i] gathers inputs[i].
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;

  // The root receives every rank's input, in rank order; other ranks pass no outputs.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) override;

  // Rank r receives the root's input r; other ranks pass no inputs.
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) override;

  // Several _reduce_scatter_base operations at once; outputs[i] receives its block of inputs[i].
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) override;

  // Rank r sends slice j of its input (along dim 0) to rank j and receives slice r of every rank's input; splits may be uneven.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor, std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) override;

  // Rank r sends input_tensors[j] to rank j and receives rank j's input_tensors[r] into output_tensors[j]; sizes may differ per peer.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions& opts) override;

  // Sends the tensor to dst_rank; a recv on dst_rank with the same tag receives it.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;

  // Receives the tensor src_rank sends with the same tag; messages of one sender and tag arrive in order.
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;

  // Receives the first tensor any rank sends with the tag; the Work reports the sender's rank.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<::occl::runtime::Runtime> runtime_;
  std::unique_ptr<::occl::kit::Engine> engine_;  // after runtime_: destroyed first
  c10::intrusive_ptr<c10d::Store> store_;  // what a shrunk group connects through
  uint64_t shrinks_ = 0;  // of this group so far: each one's keys have a prefix of their own
};

}  // namespace occl
