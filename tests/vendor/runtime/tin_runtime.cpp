// The tin runtime: how it works is in tin_runtime.hpp.
#include "runtime/tin_runtime.hpp"

#include "occl_kit/staging.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace tin::runtime {

namespace {

// The bytes of `tensor` in element order (any layout, any dtype).
std::vector<uint8_t> bytes_of(const at::Tensor& tensor) {
  const at::Tensor dense = tensor.contiguous();
  const auto* data = static_cast<const uint8_t*>(dense.data_ptr());
  return std::vector<uint8_t>(data, data + dense.nbytes());
}

// Writes rank `source`'s bytes into `output`, which may be non-contiguous.
void unpack(std::vector<uint8_t> bytes, const at::Tensor& output, int source) {
  TORCH_CHECK(bytes.size() == output.nbytes(), "rank ", source, " sent ", bytes.size(),
              " bytes, expected ", output.nbytes(), " for a ", output.scalar_type(), " tensor of ",
              output.sizes());
  output.copy_(at::from_blob(bytes.data(), output.sizes(), output.options()));
}

std::chrono::milliseconds time_left(const kit::OpContext& ctx) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deadline - kit::Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

std::unique_ptr<Runtime> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 const Config& config) {
  return std::make_unique<StoreRuntime>(store, rank, size, config);
}

StoreRuntime::StoreRuntime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           const Config& config)
    : store_(store), rank_(rank), size_(size), key_prefix_(config.key_prefix) {}

std::vector<std::vector<uint8_t>> StoreRuntime::publish_and_collect(
    const kit::OpContext& ctx, const std::string& prefix, const std::vector<uint8_t>& mine) {
  store_->set(prefix + "/" + std::to_string(rank_), mine);
  std::vector<std::string> keys;
  for (int rank = 0; rank < size_; ++rank) keys.push_back(prefix + "/" + std::to_string(rank));
  try {
    // store.wait honours the op's deadline, where store.get alone would wait for the store's.
    store_->wait(keys, time_left(ctx));
  } catch (const c10::Error&) {  // a plain c10::Error from FileStore, DistStoreError from TCPStore
    std::vector<int> missing;
    std::string names;
    for (int rank = 0; rank < size_; ++rank) {
      if (store_->check({keys[rank]})) continue;
      missing.push_back(rank);
      names += " " + std::to_string(rank);
    }
    throw kit::LinkError(kit::LinkError::Kind::Timeout, "these ranks did not join:" + names,
                         missing);
  }
  std::vector<std::vector<uint8_t>> values;
  for (const auto& key : keys) values.push_back(store_->get(key));
  return values;
}

void StoreRuntime::exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone,
                                       size_t bytes) {
  const auto* first = static_cast<const uint8_t*>(mine);
  auto values = publish_and_collect(
      ctx, key_prefix_ + "/signature/" + std::to_string(signature_exchanges_++),
      std::vector<uint8_t>(first, first + bytes));
  for (int rank = 0; rank < size_; ++rank) {
    TORCH_CHECK(values[rank].size() == bytes, "rank ", rank, " sent a signature record of ",
                values[rank].size(), " bytes, expected ", bytes);
    std::memcpy(static_cast<uint8_t*>(everyone) + rank * bytes, values[rank].data(), bytes);
  }
}

void StoreRuntime::all_gather(kit::OpContext& ctx,
                              const std::vector<std::vector<at::Tensor>>& output_tensors,
                              const std::vector<at::Tensor>& input_tensors,
                              const c10d::AllgatherOptions& /*opts*/) {
  // The spec checks input_tensors and the inner lists of output_tensors, not the outer one.
  TORCH_CHECK(output_tensors.size() == 1, "output_tensors has ", output_tensors.size(),
              " entries, expected 1");
  auto values = publish_and_collect(ctx, key_prefix_ + "/" + std::to_string(ctx.sequence),
                                    bytes_of(input_tensors[0]));
  for (int rank = 0; rank < size_; ++rank) unpack(values[rank], output_tensors[0][rank], rank);
}

void StoreRuntime::barrier(kit::OpContext& ctx, const c10d::BarrierOptions& /*opts*/) {
  publish_and_collect(ctx, key_prefix_ + "/" + std::to_string(ctx.sequence), {});
}

void StoreRuntime::gather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& outputs,
                          const std::vector<at::Tensor>& inputs,
                          const c10d::GatherOptions& options) {
  // The spec checks outputs (on the root), not inputs.
  TORCH_CHECK(inputs.size() == 1, "inputs has ", inputs.size(), " entries, expected 1");
  // Every rank waits for every other: simpler than a root-only wait, and still correct.
  auto values = publish_and_collect(ctx, key_prefix_ + "/" + std::to_string(ctx.sequence),
                                    bytes_of(inputs[0]));
  if (ctx.rank != options.rootRank) return;
  for (int rank = 0; rank < size_; ++rank) unpack(values[rank], outputs[0][rank], rank);
}

std::string StoreRuntime::next_message_key(int src, int dst, int tag) {
  std::lock_guard<std::mutex> lock(messages_mutex_);
  uint64_t index = messages_[{src, dst, tag}]++;
  return key_prefix_ + "/p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" +
         std::to_string(tag) + "/" + std::to_string(index);
}

void StoreRuntime::send(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank,
                        int tag) {
  HeldSend send{next_message_key(rank_, dst_rank, tag), bytes_of(tensors[0]), ctx.done};
  {
    std::lock_guard<std::mutex> lock(messages_mutex_);
    if (coalescing_) return held_.push_back(std::move(send));
  }
  store_->set(send.key, send.bytes);
  send.done(nullptr, -1);
}

void StoreRuntime::start_coalescing() {
  std::lock_guard<std::mutex> lock(messages_mutex_);
  coalescing_ = true;
}

void StoreRuntime::end_coalescing() {
  std::vector<HeldSend> held;
  {
    std::lock_guard<std::mutex> lock(messages_mutex_);
    coalescing_ = false;
    held.swap(held_);
  }
  for (auto& send : held) {
    std::exception_ptr error;
    try {
      store_->set(send.key, send.bytes);
    } catch (...) {
      error = std::current_exception();
    }
    send.done(error, -1);
  }
}

void StoreRuntime::recv(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank,
                        int tag) {
  // The completion engine polls the key from its own thread until the message is there.
  ctx.complete_when([this, key = next_message_key(src_rank, rank_, tag), output = tensors[0],
                     src_rank] {
    if (!store_->check({key})) return kit::Poll{};
    unpack(store_->get(key), output, src_rank);
    return kit::Poll{true, src_rank};
  });
}

}  // namespace tin::runtime
