// The tin runtime: the contract generated from spec/tin.yaml (generated/csrc/tin_contract.hpp),
// built on occl's backend kit, moving every op's data through the group's c10d::Store.
//
// The kit runs the ops: collectives in issue order on the group's worker, each after every rank's
// signature agreed (exchange_signatures, below), errors named, timeouts and fail-fast; the
// runtime only moves bytes. Collective number `seq` of a group is the same on every rank, so rank
// r publishes its input under "<key_prefix>/<seq>/<r>" and reads the others' keys. A message from
// rank s to rank d with tag t is the n-th of that triple on both ends: "<key_prefix>/p2p/s/d/t/n";
// the receive hands the kit's completion engine a test of whether that key exists yet. Between
// the kit's coalescing hooks (batch_isend_irecv) sends are held back and published together at
// the end, as a library that batches would: a receive in such a batch completes only if the hooks
// run. Keys are never deleted: this is a fixture, not a transport.
#pragma once

#include "tin_contract.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace tin::runtime {

namespace kit = ::occl::kit;

class StoreRuntime final : public Runtime {
 public:
  StoreRuntime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               const Config& config);

  void exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone,
                           size_t bytes) override;
  void start_coalescing() override;
  void end_coalescing() override;

  void all_gather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
                  const std::vector<at::Tensor>& input_tensors,
                  const c10d::AllgatherOptions& opts) override;
  void barrier(kit::OpContext& ctx, const c10d::BarrierOptions& opts) override;
  void gather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& outputs,
              const std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) override;
  void send(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank,
            int tag) override;
  void recv(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank,
            int tag) override;

 private:
  // Sets this rank's key under `prefix`, then returns every rank's value once all are set.
  std::vector<std::vector<uint8_t>> publish_and_collect(const kit::OpContext& ctx,
                                                        const std::string& prefix,
                                                        const std::vector<uint8_t>& mine);
  // The key of the next message from `src` to `dst` with `tag`.
  std::string next_message_key(int src, int dst, int tag);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  std::string key_prefix_;
  uint64_t signature_exchanges_ = 0;  // on the worker thread only
  struct HeldSend {
    std::string key;
    std::vector<uint8_t> bytes;
    kit::DoneFn done;
  };
  std::mutex messages_mutex_;
  std::map<std::tuple<int, int, int>, uint64_t> messages_;  // (src, dst, tag) -> sent so far
  bool coalescing_ = false;
  std::vector<HeldSend> held_;  // sends issued while coalescing
};

}  // namespace tin::runtime
