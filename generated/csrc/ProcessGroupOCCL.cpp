// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
#include "ProcessGroupOCCL.hpp"

#include "occl_checks.hpp"

namespace occl {

ProcessGroupOCCL::Options::Options() : c10d::Backend::Options("occl") {}

namespace {

::occl::runtime::Config config_of(const ProcessGroupOCCL::Options& options) {
  return {options.timeout, options.group_name, options.global_ranks_in_group,
      options.bind_address};
}

}  // namespace

ProcessGroupOCCL::ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options)
    : ProcessGroupOCCL(store, rank, size, options,
          ::occl::runtime::connect(store, rank, size, config_of(*options))) {}

ProcessGroupOCCL::ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options,
    std::unique_ptr<::occl::runtime::Runtime> runtime)
    : c10d::Backend(rank, size), options_(std::move(options)), runtime_(std::move(runtime)),
      store_(store) {
  engine_ = std::make_unique<::occl::kit::Engine>(*runtime_, *this,
      ::occl::kit::GroupInfo{"occl", options_->group_name, rank, size,
                            options_->global_ranks_in_group, options_->timeout},
      /*agree=*/true, store);
}

ProcessGroupOCCL::~ProcessGroupOCCL() = default;

const std::string ProcessGroupOCCL::getBackendName() const { return "occl"; }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupOCCL::getBackendOptions() {
  return options_;
}

bool ProcessGroupOCCL::supportsCoalescing() const { return true; }

bool ProcessGroupOCCL::supportsSplitting() const { return true; }

bool ProcessGroupOCCL::supportsTimeEstimation() const { return false; }

bool ProcessGroupOCCL::supportsShrinking() const { return true; }

void ProcessGroupOCCL::shutdown() { engine_->shutdown(); }

void ProcessGroupOCCL::abort() { engine_->abort(); }

void ProcessGroupOCCL::setSequenceNumberForGroup() {}

uint64_t ProcessGroupOCCL::getSequenceNumberForGroup() { return engine_->sequence_number(); }

void ProcessGroupOCCL::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  engine_->set_completion_hook(std::move(hook));
}

void ProcessGroupOCCL::enableCollectivesTiming() { engine_->enable_timing(); }

void ProcessGroupOCCL::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  engine_->monitored_barrier(opts.timeout, wait_all_ranks);
}

void ProcessGroupOCCL::startCoalescing() { engine_->start_coalescing(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::endCoalescing() {
  return engine_->end_coalescing();
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupOCCL::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  const auto subgroup = ::occl::kit::plan_subgroup("occl.split", ranks, getRank(),
      getSize(), options_->global_ranks_in_group);
  // This group's own options (torch hands split() only the base class's fields), with what
  // torch chose for the subgroup.
  auto options = c10::make_intrusive<Options>(*options_);
  options->timeout = opts->timeout;
  options->group_name = opts->group_name;
  options->group_desc = opts->group_desc;
  options->global_ranks_in_group = subgroup.global_ranks;
  auto runtime = runtime_->split(subgroup, config_of(*options));
  if (!runtime) return nullptr;
  return c10::make_intrusive<ProcessGroupOCCL>(store, subgroup.rank, subgroup.size(),
      std::move(options), std::move(runtime));
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupOCCL::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) {
  const auto plan = ::occl::kit::plan_shrink("occl.shrink", ranks_to_exclude,
      shrink_flags, getRank(), getSize(), options_->global_ranks_in_group);
  if (plan.abort_in_flight) engine_->abort();
  // The caller's own options, or this group's; torch's base options change only the timeout.
  const auto* own = dynamic_cast<const Options*>(opts_override.get());
  auto options = c10::make_intrusive<Options>(own ? *own : *options_);
  if (opts_override) options->timeout = opts_override->timeout;
  options->global_ranks_in_group = plan.survivors.global_ranks;
  return c10::make_intrusive<ProcessGroupOCCL>(::occl::kit::shrink_store(store_, shrinks_++),
      plan.survivors.rank, plan.survivors.size(), std::move(options));
}

bool ProcessGroupOCCL::supportsTensorAlloc(c10::DeviceIndex) { return true; }

at::Tensor ProcessGroupOCCL::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK(size >= 0, "occl.allocate_tensor: size is ", size,
              ", expected a number of elements >= 0");
  TORCH_CHECK(is_supported_device(options.device()), "occl.allocate_tensor: device is ",
              options.device(), ", expected one of: ", kSupportedDevices);
  return runtime_->allocate_tensor(size, options);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.broadcast", "occl:broadcast",
                                          c10d::OpType::BROADCAST};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_ROOT_TENSOR_IS_ZERO(kOp.label, "opts.rootTensor", (opts.rootTensor));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->broadcast(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allreduce", "occl:allreduce",
                                          c10d::OpType::ALLREDUCE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE_OR_SPARSE_COO(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  if (tensors[0].is_sparse()) {
    OCCL_CHECK_REDUCE_OP_IS_SUM(kOp.label, "opts.reduceOp", (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->allreduce(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = tensors[0].numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp), .shape = ::occl::kit::sparse_shape(tensors[0])},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allgather", "occl:allgather",
                                          c10d::OpType::ALLGATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->allgather(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensors),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .count = input_tensors[0].numel()},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl._allgather_base", "occl:_allgather_base",
                                          c10d::OpType::_ALLGATHER_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_SAME_DEVICE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp.label, "output_tensor", (output_tensor), (input_tensor.numel() * world_size), "input_tensor.numel() * world_size");
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), opts](::occl::kit::OpContext& ctx) { runtime->allgather_base(ctx, output_tensor, input_tensor, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensor), .count = input_tensor.numel()},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.reduce_scatter", "occl:reduce_scatter",
                                          c10d::OpType::REDUCE_SCATTER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->reduce_scatter(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return ::occl::kit::flatten(input_tensors); }, output_tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensors[0]), .count = output_tensors[0].numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_reduce_scatter_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl._reduce_scatter_base", "occl:_reduce_scatter_base",
                                          c10d::OpType::_REDUCE_SCATTER_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp.label, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_CHECK_SAME_DEVICE(kOp.label, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_CHECK_NUMEL_EQUALS(kOp.label, "input_tensor", (input_tensor), (output_tensor.numel() * world_size), "output_tensor.numel() * world_size");
  OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, "output_tensor", (output_tensor), (opts.reduceOp));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), opts](::occl::kit::OpContext& ctx) { runtime->reduce_scatter_base(ctx, output_tensor, input_tensor, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensor), .count = output_tensor.numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::barrier(const c10d::BarrierOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.barrier", "occl:barrier",
                                          c10d::OpType::BARRIER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  auto run = [runtime = runtime_.get(), opts](::occl::kit::OpContext& ctx) { runtime->barrier(ctx, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{}; }, std::vector<at::Tensor>{},
      ::occl::kit::Signature{},
      std::move(run));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allreduce_coalesced", "occl:allreduce_coalesced",
                                          c10d::OpType::ALLREDUCE_COALESCED};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_NON_EMPTY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (tensors[0]), "tensors[0]");
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (tensors[0]), "tensors[0]");
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->allreduce_coalesced(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = total_numel(tensors), .reduction = ::occl::kit::reduction_label(opts.reduceOp), .tensor_numels = ::occl::kit::numels_of(tensors)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allreduce_sparse", "occl:allreduce_sparse",
                                          c10d::OpType::_ALLREDUCE_SPARSE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SPARSE_COO(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_REDUCE_OP_IS_SUM(kOp.label, "opts.reduceOp", (opts.reduceOp));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->allreduce_sparse(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = tensors[0].numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp), .shape = ::occl::kit::sparse_shape(tensors[0])},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.reduce", "occl:reduce",
                                          c10d::OpType::REDUCE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_ROOT_TENSOR_IS_ZERO(kOp.label, "opts.rootTensor", (opts.rootTensor));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->reduce(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = total_numel(tensors), .root = opts.rootRank, .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_tensor_lists, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allgather_coalesced", "occl:allgather_coalesced",
                                          c10d::OpType::ALLGATHER_COALESCED};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_NON_EMPTY(kOp.label, "input_tensors", (input_tensors));
  OCCL_CHECK_ENTRY_PER_RANK(kOp.label, "output_tensor_lists", (output_tensor_lists));
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    OCCL_CHECK_SAME_LENGTH(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0), (output_tensor_lists[i0]), (input_tensors), "input_tensors");
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]), (input_tensors[i1]), "input_tensors[i1]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]), (input_tensors[i1]), "input_tensors[i1]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensor_lists.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensor_lists[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("output_tensor_lists", i0, i1), (output_tensor_lists[i0][i1]), (input_tensors[i1].numel()), "input_tensors[i1].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor_lists = host.written(output_tensor_lists), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->allgather_coalesced(ctx, output_tensor_lists, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensor_lists),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .count = total_numel(input_tensors), .tensor_numels = ::occl::kit::numels_of(input_tensors)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.allgather_into_tensor_coalesced", "occl:allgather_into_tensor_coalesced",
                                          c10d::OpType::COALESCED};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SAME_LENGTH(kOp.label, "outputs", (outputs), (inputs), "inputs");
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]), (inputs[i0]), "inputs[i0]");
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]), (inputs[i0]), "inputs[i0]");
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]), (inputs[i0].numel() * world_size), "inputs[i0].numel() * world_size");
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), outputs = host.written(outputs), inputs = host.read(inputs), opts](::occl::kit::OpContext& ctx) { runtime->allgather_into_tensor_coalesced(ctx, outputs, inputs, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return inputs; }, outputs,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(inputs[0]), .count = total_numel(inputs), .tensor_numels = ::occl::kit::numels_of(inputs)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::gather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.gather", "occl:gather",
                                          c10d::OpType::GATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_CHECK_NO_ENTRIES(kOp.label, "output_tensors", (output_tensors));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->gather(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensors),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .count = input_tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.scatter", "occl:scatter",
                                          c10d::OpType::SCATTER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_CHECK_NO_ENTRIES(kOp.label, "input_tensors", (input_tensors));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->scatter(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return ::occl::kit::flatten(input_tensors); }, output_tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensors[0]), .count = output_tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.reduce_scatter_tensor_coalesced", "occl:reduce_scatter_tensor_coalesced",
                                          c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SAME_LENGTH(kOp.label, "inputs", (inputs), (outputs), "outputs");
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]));
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]), (outputs[i0]), "outputs[i0]");
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]), (outputs[i0]), "outputs[i0]");
  }
  for (size_t i0 = 0; i0 < inputs.size(); ++i0) {
    OCCL_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("inputs", i0), (inputs[i0]), (outputs[i0].numel() * world_size), "outputs[i0].numel() * world_size");
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), outputs = host.written(outputs), inputs = host.read(inputs), opts](::occl::kit::OpContext& ctx) { runtime->reduce_scatter_tensor_coalesced(ctx, outputs, inputs, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return inputs; }, outputs,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(outputs[0]), .count = total_numel(outputs), .reduction = ::occl::kit::reduction_label(opts.reduceOp), .tensor_numels = ::occl::kit::numels_of(outputs)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor, std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.alltoall_base", "occl:alltoall_base",
                                          c10d::OpType::ALLTOALL_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_CHECK_SAME_DTYPE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_SAME_DEVICE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_CHECK_SPLIT_SIZES(kOp.label, "input_split_sizes", (input_split_sizes), (input_tensor), "input_tensor");
  OCCL_CHECK_SPLIT_SIZES(kOp.label, "output_split_sizes", (output_split_sizes), (output_tensor), "output_tensor");
  OCCL_CHECK_EQUAL_VALUES(kOp.label, "slice_bytes(output_split_sizes, output_tensor, rank, world_size)", (slice_bytes(output_split_sizes, output_tensor, rank, world_size)), (slice_bytes(input_split_sizes, input_tensor, rank, world_size)), "slice_bytes(input_split_sizes, input_tensor, rank, world_size)");
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), output_split_sizes, input_split_sizes, opts](::occl::kit::OpContext& ctx) { runtime->alltoall_base(ctx, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensor), .bytes_to = bytes_per_slice(input_split_sizes, input_tensor, world_size), .bytes_from = bytes_per_slice(output_split_sizes, output_tensor, world_size)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::alltoall(std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.alltoall", "occl:alltoall",
                                          c10d::OpType::ALLTOALL};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_ENTRY_PER_RANK(kOp.label, "output_tensors", (output_tensors));
  OCCL_CHECK_ENTRY_PER_RANK(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]), (input_tensors[0]), "input_tensors[0]");
  }
  OCCL_CHECK_EQUAL_VALUES(kOp.label, "output_tensors[rank].numel()", (output_tensors[rank].numel()), (input_tensors[rank].numel()), "input_tensors[rank].numel()");
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->alltoall(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, output_tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .bytes_to = bytes_per_tensor(input_tensors), .bytes_from = bytes_per_tensor(output_tensors)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.send", "occl:send",
                                          c10d::OpType::SEND};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_PEER_RANK(kOp.label, "dst_rank", (dst_rank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), dst_rank, tag](::occl::kit::OpContext& ctx) { runtime->send(ctx, tensors, dst_rank, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return tensors; }, tensors, std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.recv", "occl:recv",
                                          c10d::OpType::RECV};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_CHECK_PEER_RANK(kOp.label, "src_rank", (src_rank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), src_rank, tag](::occl::kit::OpContext& ctx) { runtime->recv(ctx, tensors, src_rank, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return tensors; }, tensors, std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"occl.recvAnysource", "occl:recvAnysource",
                                          c10d::OpType::RECVANYSOURCE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), tag](::occl::kit::OpContext& ctx) { runtime->recv_anysource(ctx, tensors, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return tensors; }, tensors, std::move(run), host.copy_back());
}

}  // namespace occl
