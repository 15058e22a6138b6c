// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m codegen`.
#include "ProcessGroupOCCL.hpp"

#include "occl_checks.hpp"

#include <ATen/core/jit_type.h>

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

c10::intrusive_ptr<c10::ivalue::Future> WorkOCCL::getFuture() { return future_; }

std::vector<at::Tensor> WorkOCCL::result() { return outputs_; }

void WorkOCCL::complete(std::exception_ptr error) {
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

bool ProcessGroupOCCL::supportsCoalescing() const { return false; }

bool ProcessGroupOCCL::supportsSplitting() const { return false; }

bool ProcessGroupOCCL::supportsTimeEstimation() const { return false; }

bool ProcessGroupOCCL::supportsShrinking() const { return false; }

void ProcessGroupOCCL::shutdown() { runtime_->shutdown(); }

void ProcessGroupOCCL::abort() { runtime_->abort(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  static constexpr const char* kOp = "occl.broadcast";
  [[maybe_unused]] const int world_size = getSize();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_ROOT_TENSOR_IS_ZERO(kOp, "opts.rootTensor", (opts.rootTensor));
  auto work = c10::make_intrusive<WorkOCCL>(
      getRank(), c10d::OpType::BROADCAST, "occl:broadcast", tensors);
  runtime_->submit(
      kOp, opts.timeout,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::broadcast(ctx, tensors, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr const char* kOp = "occl.allreduce";
  [[maybe_unused]] const int world_size = getSize();
  OCCL_CHECK_SINGLE_ENTRY(kOp, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, occl::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  auto work = c10::make_intrusive<WorkOCCL>(
      getRank(), c10d::OpType::ALLREDUCE, "occl:allreduce", tensors);
  runtime_->submit(
      kOp, opts.timeout,
      [tensors, opts](OpContext& ctx) { ::occl::runtime::allreduce(ctx, tensors, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl.allgather";
  [[maybe_unused]] const int world_size = getSize();
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
      getRank(), c10d::OpType::ALLGATHER, "occl:allgather", flatten(output_tensors));
  runtime_->submit(
      kOp, opts.timeout,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::allgather(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "occl._allgather_base";
  [[maybe_unused]] const int world_size = getSize();
  OCCL_CHECK_DENSE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_DENSE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp, "output_tensor", (output_tensor), (input_tensor.numel() * world_size), "input_tensor.numel() * world_size");
  auto work = c10::make_intrusive<WorkOCCL>(
      getRank(), c10d::OpType::_ALLGATHER_BASE, "occl:_allgather_base", std::vector<at::Tensor>{output_tensor});
  runtime_->submit(
      kOp, opts.timeout,
      [output_tensor, input_tensor, opts](OpContext& ctx) { ::occl::runtime::allgather_base(ctx, output_tensor, input_tensor, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "occl.reduce_scatter";
  [[maybe_unused]] const int world_size = getSize();
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
      getRank(), c10d::OpType::REDUCE_SCATTER, "occl:reduce_scatter", output_tensors);
  runtime_->submit(
      kOp, opts.timeout,
      [output_tensors, input_tensors, opts](OpContext& ctx) { ::occl::runtime::reduce_scatter(ctx, output_tensors, input_tensors, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_reduce_scatter_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "occl._reduce_scatter_base";
  [[maybe_unused]] const int world_size = getSize();
  OCCL_CHECK_DENSE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_DENSE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp, "input_tensor", (input_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp, "input_tensor", (input_tensor), (output_tensor.numel() * world_size), "output_tensor.numel() * world_size");
  OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp, "output_tensor", (output_tensor), (opts.reduceOp));
  auto work = c10::make_intrusive<WorkOCCL>(
      getRank(), c10d::OpType::_REDUCE_SCATTER_BASE, "occl:_reduce_scatter_base", std::vector<at::Tensor>{output_tensor});
  runtime_->submit(
      kOp, opts.timeout,
      [output_tensor, input_tensor, opts](OpContext& ctx) { ::occl::runtime::reduce_scatter_base(ctx, output_tensor, input_tensor, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::barrier(const c10d::BarrierOptions& opts) {
  static constexpr const char* kOp = "occl.barrier";
  [[maybe_unused]] const int world_size = getSize();
  auto work = c10::make_intrusive<WorkOCCL>(
      getRank(), c10d::OpType::BARRIER, "occl:barrier", std::vector<at::Tensor>{});
  runtime_->submit(
      kOp, opts.timeout,
      [opts](OpContext& ctx) { ::occl::runtime::barrier(ctx, opts); },
      [work](std::exception_ptr error) { work->complete(error); });
  return work;
}

}  // namespace occl
