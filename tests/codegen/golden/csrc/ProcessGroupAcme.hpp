// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
//
// The acme c10d::Backend: argument checks and glue, generated. The kit's engine
// runs each op (occl_kit/engine.hpp) through the runtime contract in acme_contract.hpp.
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
#include "acme_contract.hpp"

namespace acme::c10d {

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
  // Runs over `runtime`, connected already (split() makes one).
  ProcessGroupAcme(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      c10::intrusive_ptr<Options> options,
      std::unique_ptr<::acme::runtime::Runtime> runtime);
  ~ProcessGroupAcme() override;

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsCoalescing() const override;
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
  // The group without `ranks_to_exclude` (ranks of this group, which may be dead): the survivors
  // connect afresh through this group's store, under a prefix of this shrink's own, so nothing
  // of the group's links or shared memory carries over. Only survivors call it, all in the same
  // order. SHRINK_ABORT (torch's flag 1) first fails this group's ops in flight.
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude,
      int shrink_flags, const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) override;

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
  std::unique_ptr<::occl::kit::Engine> engine_;  // after runtime_: destroyed first
  c10::intrusive_ptr<c10d::Store> store_;  // what a shrunk group connects through
  uint64_t shrinks_ = 0;  // of this group so far: each one's keys have a prefix of their own
};

}  // namespace acme::c10d
