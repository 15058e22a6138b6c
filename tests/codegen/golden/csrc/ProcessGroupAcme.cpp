// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
#include "ProcessGroupAcme.hpp"

#include "acme_checks.hpp"

#include <ATen/core/jit_type.h>

#include <memory>
#include <mutex>

namespace acme::c10d {
// The spec's check conditions name runtime functions unqualified.
using namespace ::acme::runtime;

namespace {

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

}  // namespace

WorkAcme::WorkAcme(int rank, c10d::OpType op_type,
    const char* profiling_title, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op_type, profiling_title, outputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

c10::intrusive_ptr<WorkAcme> WorkAcme::all_of(int rank,
    std::vector<c10::intrusive_ptr<WorkAcme>> works) {
  std::vector<at::Tensor> outputs;
  for (const auto& work : works) {
    outputs.insert(outputs.end(), work->outputs_.begin(), work->outputs_.end());
  }
  auto group = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::COALESCED, "acme:coalesced", outputs);
  if (works.empty()) {
    group->complete(nullptr, -1);
    return group;
  }
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::exception_ptr first_error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works.size();
  for (const auto& work : works) {
    work->ticket_.wake_worker();
    work->future_->addCallback([group, pending](c10::ivalue::Future& future) {
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (future.hasError() && !pending->first_error) pending->first_error = future.exception_ptr();
        if (--pending->left > 0) return;
        error = pending->first_error;
      }
      group->complete(error, -1);
    });
  }
  return group;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkAcme::getFuture() {
  ticket_.wake_worker();
  return future_;
}

bool WorkAcme::isCompleted() {
  ticket_.wake_worker();
  return c10d::Work::isCompleted();
}

std::vector<at::Tensor> WorkAcme::result() { return outputs_; }

int WorkAcme::sourceRank() const { return source_rank_; }

bool WorkAcme::wait(std::chrono::milliseconds timeout) {
  if (timeout != ::kNoTimeout || !ticket_.run_if_next()) ticket_.wake_worker();
  return c10d::Work::wait(timeout);
}

void WorkAcme::complete(std::exception_ptr error, int source_rank) {
  source_rank_ = source_rank;
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

ProcessGroupAcme::Options::Options() : c10d::Backend::Options("acme") {}

ProcessGroupAcme::ProcessGroupAcme(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), options_(std::move(options)) {
  Config config;
  config.timeout = options_->timeout;
  config.group_name = options_->group_name;
  config.global_ranks_in_group = options_->global_ranks_in_group;
  config.address = options_->address;
  config.port = options_->port;
  config.verbose = options_->verbose;
  runtime_ = std::make_unique<Runtime>(store, rank, size, std::move(config));
}

ProcessGroupAcme::~ProcessGroupAcme() = default;

const std::string ProcessGroupAcme::getBackendName() const { return "acme"; }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupAcme::getBackendOptions() {
  return options_;
}

bool ProcessGroupAcme::supportsCoalescing() const { return true; }

bool ProcessGroupAcme::supportsSplitting() const { return false; }

void ProcessGroupAcme::shutdown() { runtime_->shutdown(); }

void ProcessGroupAcme::abort() { runtime_->abort(); }

void ProcessGroupAcme::startCoalescing() {
  TORCH_CHECK(!coalescing_, "acme: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::endCoalescing() {
  TORCH_CHECK(coalescing_, "acme: endCoalescing called without startCoalescing");
  coalescing_ = false;
  return WorkAcme::all_of(getRank(), std::move(coalesced_));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "acme.allgather";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_SINGLE_ENTRY(kOp, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      ACME_CHECK_DENSE(kOp, acme::c10d::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    ACME_CHECK_ONE_PER_RANK(kOp, acme::c10d::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      ACME_CHECK_SAME_DTYPE(kOp, acme::c10d::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  auto work = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::ALLGATHER, "acme:allgather", flatten(output_tensors));
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::acme::runtime::all_gather(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  static constexpr const char* kOp = "acme.send";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  ACME_CHECK_RANK_IN_RANGE(kOp, "dstRank", (dstRank));
  auto work = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::SEND, "acme:send", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, c10d::kUnsetTimeout, false,
      [tensors, dstRank, tag](OpContext& ctx) { ::acme::runtime::send(ctx, tensors, dstRank, tag); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::barrier(const c10d::BarrierOptions& opts) {
  static constexpr const char* kOp = "acme.barrier";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  auto work = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::BARRIER, "acme:barrier", std::vector<at::Tensor>{});
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [opts](OpContext& ctx) { ::acme::runtime::barrier(ctx, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) {
  static constexpr const char* kOp = "acme.gather";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  if (rank == options.rootRank) {
    ACME_CHECK_SINGLE_ENTRY(kOp, "outputs", (outputs));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    ACME_CHECK_ONE_PER_RANK(kOp, acme::c10d::CheckLabel("outputs", i0), (outputs[i0]));
  }
  auto work = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::GATHER, "acme:gather", flatten(outputs));
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, options.timeout, !options.asyncOp,
      [outputs, inputs, options](OpContext& ctx) { ::acme::runtime::gather(ctx, outputs, inputs, options); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::recv(std::vector<at::Tensor>& received, int srcRank, int tag) {
  static constexpr const char* kOp = "acme.recv";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_RANK_IN_RANGE(kOp, "srcRank", (srcRank));
  auto work = c10::make_intrusive<WorkAcme>(
      rank, c10d::OpType::RECV, "acme:recv", received);
  work->set_ticket(runtime_->submit(
      Dispatch::Posted, kOp, c10d::kUnsetTimeout, false,
      [received, srcRank, tag](OpContext& ctx) { ::acme::runtime::recv(ctx, received, srcRank, tag); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

}  // namespace acme::c10d
