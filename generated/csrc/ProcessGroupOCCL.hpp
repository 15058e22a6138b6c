// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m codegen`.
//
// The occl c10d::Backend: argument checks and glue, generated; the work itself
// is done by the runtime in torch_occl/csrc/runtime.hpp.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "torch_occl/csrc/runtime.hpp"

namespace occl {

// What every occl op returns. Its future holds the op's output tensors (as
// gloo's does), so DDP comm hooks can read them.
class WorkOCCL : public c10d::Work {
 public:
  WorkOCCL(int rank, c10d::OpType op_type, const char* profiling_title,
      std::vector<at::Tensor> outputs);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  // Called once, by the runtime's worker: completes the future, then the Work.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupOCCL : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    Options();
    // Address this rank's listening socket binds to; peers connect to it.
    std::string bind_address = "127.0.0.1";
    // torch.distributed's id of the group ('0' is the default group); names store keys.
    std::string group_id = "0";
  };

  // Connects to every other rank of the group through `store` before it returns.
  ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options);
  ~ProcessGroupOCCL() override;

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsCoalescing() const override;
  bool supportsSplitting() const override;
  bool supportsTimeEstimation() const override;
  bool supportsShrinking() const override;
  void shutdown() override;
  void abort() override;

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

 private:
  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<::occl::runtime::Runtime> runtime_;
};

}  // namespace occl
