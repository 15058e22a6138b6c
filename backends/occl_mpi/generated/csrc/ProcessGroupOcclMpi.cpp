// generated — do not edit. Source: spec/occl_mpi.yaml; regenerate with `python -m occl_codegen --spec spec/occl_mpi.yaml --out generated` in the folder holding spec/ and generated/.
#include "ProcessGroupOcclMpi.hpp"

#include "occl_mpi_checks.hpp"

namespace occl_mpi {

ProcessGroupOcclMpi::Options::Options() : c10d::Backend::Options("occl_mpi") {}

namespace {

::occl_mpi::runtime::Config config_of(const ProcessGroupOcclMpi::Options& options) {
  return {options.timeout, options.group_name, options.global_ranks_in_group};
}

}  // namespace

ProcessGroupOcclMpi::ProcessGroupOcclMpi(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options)
    : ProcessGroupOcclMpi(store, rank, size, options,
          ::occl_mpi::runtime::connect(store, rank, size, config_of(*options))) {}

ProcessGroupOcclMpi::ProcessGroupOcclMpi(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options,
    std::unique_ptr<::occl_mpi::runtime::Runtime> runtime)
    : c10d::Backend(rank, size), options_(std::move(options)), runtime_(std::move(runtime)) {
  engine_ = std::make_unique<::occl::kit::Engine>(*runtime_, *this,
      ::occl::kit::GroupInfo{"occl_mpi", options_->group_name, rank, size,
                            options_->global_ranks_in_group, options_->timeout},
      /*agree=*/true, store);
}

ProcessGroupOcclMpi::~ProcessGroupOcclMpi() = default;

const std::string ProcessGroupOcclMpi::getBackendName() const { return "occl_mpi"; }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupOcclMpi::getBackendOptions() {
  return options_;
}

bool ProcessGroupOcclMpi::supportsCoalescing() const { return false; }

void ProcessGroupOcclMpi::shutdown() { engine_->shutdown(); }

void ProcessGroupOcclMpi::abort() { engine_->abort(); }

void ProcessGroupOcclMpi::setSequenceNumberForGroup() {}

uint64_t ProcessGroupOcclMpi::getSequenceNumberForGroup() { return engine_->sequence_number(); }

void ProcessGroupOcclMpi::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  engine_->set_completion_hook(std::move(hook));
}

void ProcessGroupOcclMpi::enableCollectivesTiming() { engine_->enable_timing(); }

void ProcessGroupOcclMpi::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  engine_->monitored_barrier(opts.timeout, wait_all_ranks);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.broadcast", "occl_mpi:broadcast",
                                          c10d::OpType::BROADCAST};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_MPI_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_MPI_CHECK_ROOT_TENSOR_IS_ZERO(kOp.label, "opts.rootTensor", (opts.rootTensor));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->broadcast(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.allreduce", "occl_mpi:allreduce",
                                          c10d::OpType::ALLREDUCE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->allreduce(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = tensors[0].numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.allgather", "occl_mpi:allgather",
                                          c10d::OpType::ALLGATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->allgather(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensors),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .count = input_tensors[0].numel()},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::_allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi._allgather_base", "occl_mpi:_allgather_base",
                                          c10d::OpType::_ALLGATHER_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, "output_tensor", (output_tensor), (input_tensor.numel() * world_size), "input_tensor.numel() * world_size");
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), opts](::occl::kit::OpContext& ctx) { runtime->allgather_base(ctx, output_tensor, input_tensor, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensor), .count = input_tensor.numel()},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::reduce_scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ReduceScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.reduce_scatter", "occl_mpi:reduce_scatter",
                                          c10d::OpType::REDUCE_SCATTER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->reduce_scatter(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return ::occl::kit::flatten(input_tensors); }, output_tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensors[0]), .count = output_tensors[0].numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::_reduce_scatter_base(at::Tensor& output_tensor, at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi._reduce_scatter_base", "occl_mpi:_reduce_scatter_base",
                                          c10d::OpType::_REDUCE_SCATTER_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, "input_tensor", (input_tensor), (output_tensor), "output_tensor");
  OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, "input_tensor", (input_tensor), (output_tensor.numel() * world_size), "output_tensor.numel() * world_size");
  OCCL_MPI_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, "output_tensor", (output_tensor), (opts.reduceOp));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), opts](::occl::kit::OpContext& ctx) { runtime->reduce_scatter_base(ctx, output_tensor, input_tensor, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensor), .count = output_tensor.numel(), .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::barrier(const c10d::BarrierOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.barrier", "occl_mpi:barrier",
                                          c10d::OpType::BARRIER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  auto run = [runtime = runtime_.get(), opts](::occl::kit::OpContext& ctx) { runtime->barrier(ctx, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{}; }, std::vector<at::Tensor>{},
      ::occl::kit::Signature{},
      std::move(run));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.reduce", "occl_mpi:reduce",
                                          c10d::OpType::REDUCE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_MPI_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_MPI_CHECK_ROOT_TENSOR_IS_ZERO(kOp.label, "opts.rootTensor", (opts.rootTensor));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_REDUCE_OP_SUPPORTS_DTYPE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]), (opts.reduceOp));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), opts](::occl::kit::OpContext& ctx) { runtime->reduce(ctx, tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(tensors[0]), .count = total_numel(tensors), .root = opts.rootRank, .reduction = ::occl::kit::reduction_label(opts.reduceOp)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::gather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.gather", "occl_mpi:gather",
                                          c10d::OpType::GATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_MPI_CHECK_NO_ENTRIES(kOp.label, "output_tensors", (output_tensors));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0].numel()), "input_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->gather(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensors),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensors[0]), .count = input_tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::scatter(std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.scatter", "occl_mpi:scatter",
                                          c10d::OpType::SCATTER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_ROOT_RANK_IN_RANGE(kOp.label, "opts.rootRank", (opts.rootRank));
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "output_tensors", (output_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  if (rank == opts.rootRank) {
    OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  }
  if (rank != opts.rootRank) {
    OCCL_MPI_CHECK_NO_ENTRIES(kOp.label, "input_tensors", (input_tensors));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    OCCL_MPI_CHECK_LIST_LENGTH_IS_WORLD_SIZE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0), (input_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0]), "output_tensors[0]");
    }
  }
  for (size_t i0 = 0; i0 < input_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < input_tensors[i0].size(); ++i1) {
      OCCL_MPI_CHECK_NUMEL_EQUALS(kOp.label, ::occl::kit::CheckLabel("input_tensors", i0, i1), (input_tensors[i0][i1]), (output_tensors[0].numel()), "output_tensors[0].numel()");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->scatter(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return ::occl::kit::flatten(input_tensors); }, output_tensors,
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(output_tensors[0]), .count = output_tensors[0].numel(), .root = opts.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor, std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.alltoall_base", "occl_mpi:alltoall_base",
                                          c10d::OpType::ALLTOALL_BASE};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_DENSE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_DENSE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_WRITABLE(kOp.label, "output_tensor", (output_tensor));
  OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, "input_tensor", (input_tensor));
  OCCL_MPI_CHECK_SAME_DTYPE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_MPI_CHECK_SAME_DEVICE(kOp.label, "output_tensor", (output_tensor), (input_tensor), "input_tensor");
  OCCL_MPI_CHECK_SPLIT_SIZES(kOp.label, "input_split_sizes", (input_split_sizes), (input_tensor), "input_tensor");
  OCCL_MPI_CHECK_SPLIT_SIZES(kOp.label, "output_split_sizes", (output_split_sizes), (output_tensor), "output_tensor");
  OCCL_MPI_CHECK_EQUAL_VALUES(kOp.label, "slice_bytes(output_split_sizes, output_tensor, rank, world_size)", (slice_bytes(output_split_sizes, output_tensor, rank, world_size)), (slice_bytes(input_split_sizes, input_tensor, rank, world_size)), "slice_bytes(input_split_sizes, input_tensor, rank, world_size)");
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensor = host.written(output_tensor), input_tensor = host.read(input_tensor), output_split_sizes, input_split_sizes, opts](::occl::kit::OpContext& ctx) { runtime->alltoall_base(ctx, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{input_tensor}; }, std::vector<at::Tensor>{output_tensor},
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(input_tensor), .bytes_to = bytes_per_slice(input_split_sizes, input_tensor, world_size), .bytes_from = bytes_per_slice(output_split_sizes, output_tensor, world_size)},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.send", "occl_mpi:send",
                                          c10d::OpType::SEND};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_MPI_CHECK_PEER_RANK(kOp.label, "dst_rank", (dst_rank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), dst_rank, tag](::occl::kit::OpContext& ctx) { runtime->send(ctx, tensors, dst_rank, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return tensors; }, tensors, std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOcclMpi::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"occl_mpi.recv", "occl_mpi:recv",
                                          c10d::OpType::RECV};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  OCCL_MPI_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_SUPPORTED_DEVICE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  for (size_t i0 = 0; i0 < tensors.size(); ++i0) {
    OCCL_MPI_CHECK_WRITABLE(kOp.label, ::occl::kit::CheckLabel("tensors", i0), (tensors[i0]));
  }
  OCCL_MPI_CHECK_PEER_RANK(kOp.label, "src_rank", (src_rank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), src_rank, tag](::occl::kit::OpContext& ctx) { runtime->recv(ctx, tensors, src_rank, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return tensors; }, tensors, std::move(run), host.copy_back());
}

}  // namespace occl_mpi
