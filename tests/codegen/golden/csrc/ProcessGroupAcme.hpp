// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
//
// The acme c10d::Backend: argument checks and glue, generated; the work itself
// is done by the runtime in acme/runtime.hpp.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "acme/runtime.hpp"

namespace acme::c10d {

// What every acme op returns. Its future holds the op's output tensors (as
// gloo's does), so DDP comm hooks can read them.
class WorkAcme : public c10d::Work {
 public:
  WorkAcme(int rank, c10d::OpType op_type, const char* profiling_title,
      std::vector<at::Tensor> outputs);

  // A Work that completes when all of `works` have, failing with the first failure among them.
  static c10::intrusive_ptr<WorkAcme> all_of(int rank,
      std::vector<c10::intrusive_ptr<WorkAcme>> works);

  // An op whose caller said it waits at once (asyncOp false) is run by wait(); the other ways to
  // wait for it wake the group's worker for it first.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  // The sender's rank, for a receive from any source.
  int sourceRank() const override;

  // Waiting with no timeout of its own for an op that is next in line runs the op on this
  // thread (the op keeps its own timeout), saving two thread hand-offs.
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;

  // Called once, by the runtime: completes the future, then the Work.
  void complete(std::exception_ptr error, int source_rank);
  // Set once, before the Work is returned: lets wait() run a queued op itself.
  void set_ticket(::acme::runtime::Ticket ticket) { ticket_ = std::move(ticket); }

 private:
  ::acme::runtime::Ticket ticket_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
};

class ProcessGroupAcme : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    Options();
    // Address to listen on.
    std::string address = "0.0.0.0";
    // Port to listen on.
    int64_t port = 29500;
    // Log every op.
    bool verbose = false;
  };

  // Connects to every other rank of the group through `store` before it returns.
  ProcessGroupAcme(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options);
  ~ProcessGroupAcme() override;

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsCoalescing() const override;
  bool supportsSplitting() const override;
  void shutdown() override;
  void abort() override;
  // Between these, every op's Work is collected; endCoalescing returns one Work for all of them.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Every rank receives every rank's input.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) override;

  // Sends the tensor to one rank.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;

  // Returns once every rank has entered it.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // The root receives every input.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) override;

  // Receives a tensor.
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& received, int srcRank, int tag) override;

 private:
  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<::acme::runtime::Runtime> runtime_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkAcme>> coalesced_;
};

}  // namespace acme::c10d
