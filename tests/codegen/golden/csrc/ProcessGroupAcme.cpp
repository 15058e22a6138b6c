// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
#include "ProcessGroupAcme.hpp"

#include "acme_checks.hpp"

namespace acme::c10d {

ProcessGroupAcme::Options::Options() : c10d::Backend::Options("acme") {}

namespace {

::acme::runtime::Config config_of(const ProcessGroupAcme::Options& options) {
  return {options.timeout, options.group_name, options.global_ranks_in_group,
      options.address,
      options.port,
      options.verbose};
}

}  // namespace

ProcessGroupAcme::ProcessGroupAcme(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options)
    : ProcessGroupAcme(store, rank, size, options,
          ::acme::runtime::connect(store, rank, size, config_of(*options))) {}

ProcessGroupAcme::ProcessGroupAcme(const c10::intrusive_ptr<c10d::Store>& store, int rank,
    int size, c10::intrusive_ptr<Options> options,
    std::unique_ptr<::acme::runtime::Runtime> runtime)
    : c10d::Backend(rank, size), options_(std::move(options)), runtime_(std::move(runtime)),
      store_(store) {
  engine_ = std::make_unique<::occl::kit::Engine>(*runtime_, *this,
      ::occl::kit::GroupInfo{"acme", options_->group_name, rank, size,
                            options_->global_ranks_in_group, options_->timeout},
      /*agree=*/true, store);
}

ProcessGroupAcme::~ProcessGroupAcme() = default;

const std::string ProcessGroupAcme::getBackendName() const { return "acme"; }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupAcme::getBackendOptions() {
  return options_;
}

bool ProcessGroupAcme::supportsCoalescing() const { return true; }

bool ProcessGroupAcme::supportsShrinking() const { return true; }

void ProcessGroupAcme::shutdown() { engine_->shutdown(); }

void ProcessGroupAcme::abort() { engine_->abort(); }

void ProcessGroupAcme::setSequenceNumberForGroup() {}

uint64_t ProcessGroupAcme::getSequenceNumberForGroup() { return engine_->sequence_number(); }

void ProcessGroupAcme::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  engine_->set_completion_hook(std::move(hook));
}

void ProcessGroupAcme::enableCollectivesTiming() { engine_->enable_timing(); }

void ProcessGroupAcme::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  engine_->monitored_barrier(opts.timeout, wait_all_ranks);
}

void ProcessGroupAcme::startCoalescing() { engine_->start_coalescing(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::endCoalescing() {
  return engine_->end_coalescing();
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupAcme::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) {
  const auto plan = ::occl::kit::plan_shrink("acme.shrink", ranks_to_exclude,
      shrink_flags, getRank(), getSize(), options_->global_ranks_in_group);
  if (plan.abort_in_flight) engine_->abort();
  // The caller's own options, or this group's; torch's base options change only the timeout.
  const auto* own = dynamic_cast<const Options*>(opts_override.get());
  auto options = c10::make_intrusive<Options>(own ? *own : *options_);
  if (opts_override) options->timeout = opts_override->timeout;
  options->global_ranks_in_group = plan.survivors.global_ranks;
  return c10::make_intrusive<ProcessGroupAcme>(::occl::kit::shrink_store(store_, shrinks_++),
      plan.survivors.rank, plan.survivors.size(), std::move(options));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::allgather(std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"acme.allgather", "acme:allgather",
                                          c10d::OpType::ALLGATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_SINGLE_ENTRY(kOp.label, "input_tensors", (input_tensors));
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      ACME_CHECK_DENSE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]));
    }
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    ACME_CHECK_ONE_PER_RANK(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0), (output_tensors[i0]));
  }
  for (size_t i0 = 0; i0 < output_tensors.size(); ++i0) {
    for (size_t i1 = 0; i1 < output_tensors[i0].size(); ++i1) {
      ACME_CHECK_SAME_DTYPE(kOp.label, ::occl::kit::CheckLabel("output_tensors", i0, i1), (output_tensors[i0][i1]), (input_tensors[0]), "input_tensors[0]");
    }
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), output_tensors = host.written(output_tensors), input_tensors = host.read(input_tensors), opts](::occl::kit::OpContext& ctx) { runtime->all_gather(ctx, output_tensors, input_tensors, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return input_tensors; }, ::occl::kit::flatten(output_tensors),
      ::occl::kit::Signature{},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"acme.send", "acme:send",
                                          c10d::OpType::SEND};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_SINGLE_ENTRY(kOp.label, "tensors", (tensors));
  ACME_CHECK_RANK_IN_RANGE(kOp.label, "dstRank", (dstRank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), tensors = host.written(tensors), dstRank, tag](::occl::kit::OpContext& ctx) { runtime->send(ctx, tensors, dstRank, tag); };
  return engine_->queue(kOp, c10d::kUnsetTimeout, true, [&] { return tensors; }, tensors,
      ::occl::kit::Signature{},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::barrier(const c10d::BarrierOptions& opts) {
  static constexpr ::occl::kit::OpInfo kOp{"acme.barrier", "acme:barrier",
                                          c10d::OpType::BARRIER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  auto run = [runtime = runtime_.get(), opts](::occl::kit::OpContext& ctx) { runtime->barrier(ctx, opts); };
  return engine_->queue(kOp, opts.timeout, opts.asyncOp, [&] { return std::vector<at::Tensor>{}; }, std::vector<at::Tensor>{},
      ::occl::kit::Signature{},
      std::move(run));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) {
  static constexpr ::occl::kit::OpInfo kOp{"acme.gather", "acme:gather",
                                          c10d::OpType::GATHER};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  if (rank == options.rootRank) {
    ACME_CHECK_SINGLE_ENTRY(kOp.label, "outputs", (outputs));
  }
  for (size_t i0 = 0; i0 < outputs.size(); ++i0) {
    ACME_CHECK_ONE_PER_RANK(kOp.label, ::occl::kit::CheckLabel("outputs", i0), (outputs[i0]));
  }
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), outputs = host.written(outputs), inputs = host.read(inputs), options](::occl::kit::OpContext& ctx) { runtime->gather(ctx, outputs, inputs, options); };
  return engine_->queue(kOp, options.timeout, options.asyncOp, [&] { return inputs; }, ::occl::kit::flatten(outputs),
      ::occl::kit::Signature{.dtype = ::occl::kit::dtype_label(inputs[0]), .count = inputs[0].numel(), .root = options.rootRank},
      std::move(run), host.copy_back());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAcme::recv(std::vector<at::Tensor>& received, int srcRank, int tag) {
  static constexpr ::occl::kit::OpInfo kOp{"acme.recv", "acme:recv",
                                          c10d::OpType::RECV};
  [[maybe_unused]] const int world_size = getSize();
  [[maybe_unused]] const int rank = getRank();
  ACME_CHECK_RANK_IN_RANGE(kOp.label, "srcRank", (srcRank));
  ::occl::kit::HostTensors host(kOp.label, is_staged_device);
  auto run = [runtime = runtime_.get(), received = host.written(received), srcRank, tag](::occl::kit::OpContext& ctx) { runtime->recv(ctx, received, srcRank, tag); };
  return engine_->post(kOp, c10d::kUnsetTimeout, [&] { return received; }, received, std::move(run), host.copy_back());
}

}  // namespace acme::c10d
