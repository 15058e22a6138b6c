// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
#include "ProcessGroupOCCL.hpp"

#include "occl_checks.hpp"

#include <ATen/core/jit_type.h>

#include <memory>
#include <mutex>

namespace occl {
// The spec's check conditions name runtime functions unqualified.
using namespace ::occl::runtime;

namespace {

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

}  // namespace

WorkOCCL::WorkOCCL(int rank, c10d::OpType op_type,
    const char* profiling_title, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op_type, profiling_title, outputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

c10::intrusive_ptr<WorkOCCL> WorkOCCL::all_of(int rank,
    std::vector<c10::intrusive_ptr<WorkOCCL>> works) {
  std::vector<at::Tensor> outputs;
  for (const auto& work : works) {
    outputs.insert(outputs.end(), work->outputs_.begin(), work->outputs_.end());
  }
  auto group = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::COALESCED, "occl:coalesced", outputs);
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

c10::intrusive_ptr<c10::ivalue::Future> WorkOCCL::getFuture() {
  ticket_.wake_worker();
  return future_;
}

bool WorkOCCL::isCompleted() {
  ticket_.wake_worker();
  return c10d::Work::isCompleted();
}

std::vector<at::Tensor> WorkOCCL::result() { return outputs_; }

int WorkOCCL::sourceRank() const { return source_rank_; }

bool WorkOCCL::wait(std::chrono::milliseconds timeout) {
  if (timeout != ::kNoTimeout || !ticket_.run_if_next()) ticket_.wake_worker();
  return c10d::Work::wait(timeout);
}

void WorkOCCL::complete(std::exception_ptr error, int source_rank) {
  source_rank_ = source_rank;
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

ProcessGroupOCCL::Options::Options() : c10d::Backend::Options("occl") {}

ProcessGroupOCCL::ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), options_(std::move(options)) {
  Config config;
  config.timeout = options_->timeout;
  config.group_name = options_->group_name;
  config.global_ranks_in_group = options_->global_ranks_in_group;
  config.bind_address = options_->bind_address;
  config.group_id = options_->group_id;
  runtime_ = std::make_unique<Runtime>(store, rank, size, std::move(config));
}

ProcessGroupOCCL::~ProcessGroupOCCL() = default;

const std::string ProcessGroupOCCL::getBackendName() const { return "occl"; }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupOCCL::getBackendOptions() {
  return options_;
}

bool ProcessGroupOCCL::supportsCoalescing() const { return true; }

bool ProcessGroupOCCL::supportsSplitting() const { return false; }

bool ProcessGroupOCCL::supportsTimeEstimation() const { return false; }

bool ProcessGroupOCCL::supportsShrinking() const { return false; }

void ProcessGroupOCCL::shutdown() { runtime_->shutdown(); }

void ProcessGroupOCCL::abort() { runtime_->abort(); }

void ProcessGroupOCCL::startCoalescing() {
  TORCH_CHECK(!coalescing_, "occl: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::endCoalescing() {
  TORCH_CHECK(coalescing_, "occl: endCoalescing called without startCoalescing");
  coalescing_ = false;
  return WorkOCCL::all_of(getRank(), std::move(coalesced_));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  static constexpr const char* kOp = "occl.broadcast";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_ROOT_TENSOR_IS_ZERO(kOp, "opts.rootTensor", (opts.rootTensor));
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::BROADCAST, "occl:broadcast", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::broadcast(ctx, tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr const char* kOp = "occl.allreduce";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE_OR_SPARSE_COO(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  if (tensors[0].is_sparse()) {
    OCCL_CHECK_REDUCE_OP_IS_SUM(kOp, "opts.reduceOp", (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLREDUCE, "occl:allreduce", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::allreduce(ctx, tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl.allgather";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "input_tensors", (input_tensors));
  OCCL_CHECK_SINGLE_ENTRY(kOp, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLGATHER, "occl:allgather", flatten(output_tensors));
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::allgather(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl._allgather_base";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_DENSE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp, "output_tensor", (output_tensor), (input_tensor.numel() * world_size), "input_tensor.numel() * world_size");
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::_ALLGATHER_BASE, "occl:_allgather_base", std::vector<at::Tensor>{output_tensor});
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensor, input_tensor, opts](OpContext& ctx) { ::occl::runtime::allgather_base(ctx, output_tensor, input_tensor, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "occl.reduce_scatter";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "output_tensors", (output_tensors));
  OCCL_CHECK_SINGLE_ENTRY(kOp, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]), (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::REDUCE_SCATTER, "occl:reduce_scatter", output_tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::reduce_scatter(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_reduce_scatter_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "occl._reduce_scatter_base";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_DENSE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp, "input_tensor", (input_tensor), (output_tensor.numel() * world_size), "output_tensor.numel() * world_size");
  OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, "output_tensor", (output_tensor), (opts.reduceOp));
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::_REDUCE_SCATTER_BASE, "occl:_reduce_scatter_base", std::vector<at::Tensor>{output_tensor});
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensor, input_tensor, opts](OpContext& ctx) { ::occl::runtime::reduce_scatter_base(ctx, output_tensor, input_tensor, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::barrier(const c10d::BarrierOptions& opts) {
  static constexpr const char* kOp = "occl.barrier";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::BARRIER, "occl:barrier", std::vector<at::Tensor>{});
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [opts](OpContext& ctx) { ::occl::runtime::barrier(ctx, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  static constexpr const char* kOp = "occl.allreduce_coalesced";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_NON_EMPTY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]), (tensors[0]), "tensors[0]");
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLREDUCE_COALESCED, "occl:allreduce_coalesced", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::allreduce_coalesced(ctx, tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr const char* kOp = "occl.allreduce_sparse";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SPARSE_COO(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_REDUCE_OP_IS_SUM(kOp, "opts.reduceOp", (opts.reduceOp));
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::_ALLREDUCE_SPARSE, "occl:allreduce_sparse", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::allreduce_sparse(ctx, tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  static constexpr const char* kOp = "occl.reduce";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_ROOT_TENSOR_IS_ZERO(kOp, "opts.rootTensor", (opts.rootTensor));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::REDUCE, "occl:reduce", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::reduce(ctx, tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_tensor_lists, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl.allgather_coalesced";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_NON_EMPTY(kOp, "input_tensors", (input_tensors));
  OCCL_CHECK_ENTRY_PER_RANK(kOp, "output_tensor_lists", (output_tensor_lists));
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    OCCL_CHECK_SAME_LENGTH(kOp, occl::CheckLabel("output_tensor_lists", i0), (output_tensor_lists[i0]), (input_tensors), "input_tensors");
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]), (input_tensors[i1]), "input_tensors[i1]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]), (input_tensors[i1].numel()), "input_tensors[i1].numel()");
    }
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLGATHER_COALESCED, "occl:allgather_coalesced", flatten(output_tensor_lists));
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensor_lists, input_tensors, opts](OpContext& ctx) { ::occl::runtime::allgather_coalesced(ctx, output_tensor_lists, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl.allgather_into_tensor_coalesced";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SAME_LENGTH(kOp, "outputs", (outputs), (inputs), "inputs");
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]), (inputs[i0]), "inputs[i0]");
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]), (inputs[i0].numel() * world_size), "inputs[i0].numel() * world_size");
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::COALESCED, "occl:allgather_into_tensor_coalesced", outputs);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [outputs, inputs, opts](OpContext& ctx) { ::occl::runtime::allgather_into_tensor_coalesced(ctx, outputs, inputs, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::gather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  static constexpr const char* kOp = "occl.gather";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_SINGLE_ENTRY(kOp, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_CHECK_SINGLE_ENTRY(kOp, "output_tensors", (output_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_CHECK_NO_ENTRIES(kOp, "output_tensors", (output_tensors));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::GATHER, "occl:gather", flatten(output_tensors));
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::gather(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) {
  static constexpr const char* kOp = "occl.scatter";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_SINGLE_ENTRY(kOp, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_CHECK_SINGLE_ENTRY(kOp, "input_tensors", (input_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_CHECK_NO_ENTRIES(kOp, "input_tensors", (input_tensors));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::SCATTER, "occl:scatter", output_tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::scatter(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "occl.reduce_scatter_tensor_coalesced";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SAME_LENGTH(kOp, "inputs", (inputs), (outputs), "outputs");
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]), (outputs[i0]), "outputs[i0]");
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_NUMEL_EQUALS(kOp, occl::CheckLabel("inputs", i0), (inputs[i0]), (outputs[i0].numel() * world_size), "outputs[i0].numel() * world_size");
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("outputs", i0), (outputs[i0]), (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, "occl:reduce_scatter_tensor_coalesced", outputs);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [outputs, inputs, opts](OpContext& ctx) { ::occl::runtime::reduce_scatter_tensor_coalesced(ctx, outputs, inputs, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor, std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  static constexpr const char* kOp = "occl.alltoall_base";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_DENSE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_SPLIT_SIZES(kOp, "input_split_sizes", (input_split_sizes), (input_tensor), "input_tensor");
  OCCL_CHECK_SPLIT_SIZES(kOp, "output_split_sizes", (output_split_sizes), (output_tensor), "output_tensor");
  OCCL_CHECK_EQUAL_VALUES(kOp, "slice_bytes(output_split_sizes, output_tensor, rank, world_size)", (slice_bytes(output_split_sizes, output_tensor, rank, world_size)), (slice_bytes(input_split_sizes, input_tensor, rank, world_size)), "slice_bytes(input_split_sizes, input_tensor, rank, world_size)");
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLTOALL_BASE, "occl:alltoall_base", std::vector<at::Tensor>{output_tensor});
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts](OpContext& ctx) { ::occl::runtime::alltoall_base(ctx, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::alltoall(std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions& opts) {
  static constexpr const char* kOp = "occl.alltoall";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ENTRY_PER_RANK(kOp, "output_tensors", (output_tensors));
  OCCL_CHECK_ENTRY_PER_RANK(kOp, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp, occl::CheckLabel("output_tensors", i0), (output_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  OCCL_CHECK_EQUAL_VALUES(kOp, "output_tensors[rank].numel()", (output_tensors[rank].numel()), (input_tensors[rank].numel()), "input_tensors[rank].numel()");
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::ALLTOALL, "occl:alltoall", output_tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Queued, kOp, opts.timeout, !opts.asyncOp,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::alltoall(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  static constexpr const char* kOp = "occl.send";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_PEER_RANK(kOp, "dst_rank", (dst_rank));
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::SEND, "occl:send", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Posted, kOp, c10d::kUnsetTimeout, false,
      [tensors, dst_rank, tag](OpContext& ctx) { ::occl::runtime::send(ctx, tensors, dst_rank, tag); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  static constexpr const char* kOp = "occl.recv";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_PEER_RANK(kOp, "src_rank", (src_rank));
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::RECV, "occl:recv", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Posted, kOp, c10d::kUnsetTimeout, false,
      [tensors, src_rank, tag](OpContext& ctx) { ::occl::runtime::recv(ctx, tensors, src_rank, tag); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  static constexpr const char* kOp = "occl.recvAnysource";
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      rank, c10d::OpType::RECVANYSOURCE, "occl:recvAnysource", tensors);
  work->set_ticket(runtime_->submit(
      Dispatch::Posted, kOp, c10d::kUnsetTimeout, false,
      [tensors, tag](OpContext& ctx) { ::occl::runtime::recv_anysource(ctx, tensors, tag); },
      [work](std::exception_ptr error, int source_rank) { work->complete(error, source_rank); }));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

}  // namespace occl
