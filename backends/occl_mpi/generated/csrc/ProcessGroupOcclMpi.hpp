// generated — do not edit. Source: spec/occl_mpi.yaml; regenerate with `python -m occl_codegen --spec spec/occl_mpi.yaml --out generated` in the folder holding spec/ and generated/.
//
// The occl_mpi c10d::Backend: argument checks and glue, generated. The kit's engine
// runs each op (occl_kit/engine.hpp) through the runtime contract in occl_mpi_contract.hpp.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "occl_kit/engine.hpp"
#include "occl_mpi_contract.hpp"

namespace occl_mpi {

class ProcessGroupOcclMpi : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    Options();
  };

  // Connects to every other rank of the group through `store` before it returns.
  ProcessGroupOcclMpi(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options);
  // Runs over `runtime`, connected already (split() makes one).
  ProcessGroupOcclMpi(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options,
      std::unique_ptr<::occl_mpi::runtime::Runtime> runtime);
  ~ProcessGroupOcclMpi() override;

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsCoalescing() const override;
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

  // Copies the root rank's tensor into the tensor of every other rank.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;

  // Reduces the tensor across all ranks in place; every rank ends with the result.
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

  // Reduces the tensor across all ranks into the root's tensor; other ranks' tensors are left as they were.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;

  // The root receives every rank's input, in rank order; other ranks pass no outputs.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) override;

  // Rank r receives the root's input r; other ranks pass no inputs.
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) override;

  // Rank r sends slice j of its input (along dim 0) to rank j and receives slice r of every rank's input; splits may be uneven.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor, std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) override;

  // Sends the tensor to dst_rank; a recv on dst_rank with the same tag receives it.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;

  // Receives the tensor src_rank sends with the same tag; messages of one sender and tag arrive in order.
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;

 private:
  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<::occl_mpi::runtime::Runtime> runtime_;
  std::unique_ptr<::occl::kit::Engine> engine_;  // after runtime_: destroyed first
};

}  // namespace occl_mpi
