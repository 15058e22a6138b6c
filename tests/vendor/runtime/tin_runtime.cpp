// The tin runtime: how it works is in tin_runtime.hpp.
#include "runtime/tin_runtime.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <utility>

namespace tin::runtime {

namespace {

std::string rank_key(const OpContext& ctx, int rank) {
  return ctx.key + "/" + std::to_string(rank);
}

// The bytes of `tensor` in element order (any layout, any dtype).
std::vector<uint8_t> bytes_of(const at::Tensor& tensor) {
  const at::Tensor dense = tensor.contiguous();
  const auto* data = static_cast<const uint8_t*>(dense.data_ptr());
  return std::vector<uint8_t>(data, data + dense.nbytes());
}

void publish(OpContext& ctx, const std::vector<uint8_t>& bytes) {
  ctx.store.set(rank_key(ctx, ctx.rank), bytes);
}

// Every rank's key of the op, once all are set: store.wait honours the op's timeout, where
// store.get alone would wait for the store's. A timeout names the ranks that did not join.
std::vector<std::string> wait_for_every_rank(OpContext& ctx) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < ctx.size; ++rank) keys.push_back(rank_key(ctx, rank));
  try {
    ctx.store.wait(keys, ctx.timeout);
  } catch (const c10::Error&) {  // a plain c10::Error from FileStore, DistStoreError from TCPStore
    std::string missing;
    for (int rank = 0; rank < ctx.size; ++rank) {
      if (!ctx.store.check({keys[rank]})) missing += " " + std::to_string(rank);
    }
    TORCH_CHECK(false, "these ranks did not join within ", ctx.timeout.count(), " ms:", missing);
  }
  return keys;
}

// Writes rank `source`'s input into `output`, which may be non-contiguous.
void unpack(std::vector<uint8_t> bytes, const at::Tensor& output, int source) {
  TORCH_CHECK(bytes.size() == output.nbytes(), "rank ", source, " sent ", bytes.size(),
              " bytes, expected ", output.nbytes(), " for a ", output.scalar_type(), " tensor of ",
              output.sizes());
  output.copy_(at::from_blob(bytes.data(), output.sizes(), output.options()));
}

// Fills `outputs` (one tensor per rank) with every rank's input.
void receive_all(OpContext& ctx, const std::vector<at::Tensor>& outputs) {
  const auto keys = wait_for_every_rank(ctx);
  for (int rank = 0; rank < ctx.size; ++rank) {
    unpack(ctx.store.get(keys[rank]), outputs[rank], rank);
  }
}

// Runs the op, raising its failure as a DistBackendError that names it.
void run_named(const Runtime::OpFn& run, OpContext& ctx, const std::string& name) {
  try {
    run(ctx);
  } catch (const c10::Error& error) {
    C10_THROW_ERROR(DistBackendError, name + ": " + error.what_without_backtrace());
  } catch (const std::exception& error) {
    C10_THROW_ERROR(DistBackendError, name + ": " + error.what());
  }
}

}  // namespace

Runtime::Runtime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Config config)
    : store_(store), rank_(rank), size_(size), config_(std::move(config)) {}

Ticket Runtime::submit(Dispatch /*dispatch*/, const char* label, std::chrono::milliseconds timeout,
                       bool /*caller_waits*/, OpFn run, DoneFn done) {
  const uint64_t sequence = submitted_++;
  const std::string name = std::string(label) + " (op " + std::to_string(sequence) + ", rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_) + ", group '" +
                           config_.group_name + "')";
  OpContext ctx{*store_, rank_, size_, config_.key_prefix + "/" + std::to_string(sequence),
                timeout == c10d::kUnsetTimeout ? config_.timeout : timeout};
  std::exception_ptr error;
  try {
    if (stopped_) C10_THROW_ERROR(DistBackendError, name + ": the group was shut down");
    run_named(run, ctx, name);
  } catch (...) {
    error = std::current_exception();
  }
  done(error, -1);
  return {};
}

void Runtime::shutdown() { stopped_ = true; }

void Runtime::abort() { stopped_ = true; }

void all_gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
                const std::vector<at::Tensor>& input_tensors,
                const c10d::AllgatherOptions& /*opts*/) {
  // The spec checks input_tensors and the inner lists of output_tensors, not the outer one.
  TORCH_CHECK(output_tensors.size() == 1, "output_tensors has ", output_tensors.size(),
              " entries, expected 1");
  publish(ctx, bytes_of(input_tensors[0]));
  receive_all(ctx, output_tensors[0]);
}

void barrier(OpContext& ctx, const c10d::BarrierOptions& /*opts*/) {
  publish(ctx, {});
  wait_for_every_rank(ctx);
}

void gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& outputs,
            const std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) {
  // The spec checks outputs (on the root), not inputs.
  TORCH_CHECK(inputs.size() == 1, "inputs has ", inputs.size(), " entries, expected 1");
  publish(ctx, bytes_of(inputs[0]));
  if (ctx.rank != options.rootRank) return;
  receive_all(ctx, outputs[0]);
}

}  // namespace tin::runtime
