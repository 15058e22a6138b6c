// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
//
// The runtime contract of the acme backend: everything its hand-written runtime
// implements. The runtime derives a class from Runtime, overriding every op (the compiler names
// the ones it lacks), and defines connect(). The generated backend checks each op's arguments
// and hands the kit's engine a call of the op's function here; the kit (occl_kit/engine.hpp)
// queues it, checks that the ranks agree on it, bounds it by its timeout and completes its Work.
#pragma once

#include "occl_kit/engine.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace acme::runtime {

// Built by the generated backend from its Options (spec: backend.options).
struct Config {
  std::chrono::milliseconds timeout;  // for ops whose options leave it unset
  std::string group_name;
  std::vector<uint64_t> global_ranks_in_group;  // empty for the default group
  std::string address;  // Address to listen on.
  int64_t port;  // Port to listen on.
  bool verbose;  // Log every op.
};

// One function per op of the spec (its `runtime:` key), with the op's arguments. Queued ops run
// in issue order on the group's worker (or on the thread that waits for them); posted ones on
// the caller's thread, completing through ctx.done or ctx.complete_when.
class Runtime : public ::occl::kit::Runtime {
 public:
  // allgather: Every rank receives every rank's input.
  virtual void all_gather(::occl::kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors, const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) = 0;
  // send: Sends the tensor to one rank.
  virtual void send(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dstRank, int tag) = 0;
  // barrier: Returns once every rank has entered it.
  virtual void barrier(::occl::kit::OpContext& ctx, const c10d::BarrierOptions& opts) = 0;
  // gather: The root receives every input.
  virtual void gather(::occl::kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& outputs, const std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) = 0;
  // recv: Receives a tensor.
  virtual void recv(::occl::kit::OpContext& ctx, const std::vector<at::Tensor>& received, int srcRank, int tag) = 0;
};

// Connects to every other rank of the group through `store` before it returns.
std::unique_ptr<Runtime> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 const Config& config);

}  // namespace acme::runtime
