// occl's runtime: the contract the generator wrote from the spec (generated/csrc/occl_contract.hpp),
// over a mesh of shared-memory rings and TCP links (transport/) and the algorithms over it.
//
// Collectives (ops/collectives.cpp) stage their tensors into contiguous buffers and run an
// algorithm over the collective links; point-to-point ops (ops/point_to_point.cpp) go to the
// p2p engine, on links of their own. The kit's engine runs both, in order and within their
// timeouts, and checks before every collective that the ranks agree on it.
#pragma once

#include "occl_contract.hpp"

#include <memory>
#include <mutex>
#include <string>

namespace occl::transport {
class Mesh;
class P2PEngine;
struct SubgroupLinks;
}

namespace occl::runtime {

class MeshRuntime final : public Runtime {
 public:
  // Connects to every other rank of the group (through `store`) before returning.
  MeshRuntime(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              const Config& config);
  ~MeshRuntime() override;

  // A subgroup formed on this group's links (transport/subgroup.hpp), without the store.
  std::unique_ptr<Runtime> split(const kit::Subgroup& subgroup, const Config& config) override;
  // Where the group copies straight between its ranks, a buffer in pooled shared memory
  // (transport/segment_pool.hpp), which those copies reach with memcpy; elsewhere an ordinary
  // tensor (shared_tensors.cpp).
  at::Tensor allocate_tensor(int64_t numel, const at::TensorOptions& options) override;

  // ---- The kit's hooks ----------------------------------------------------------------------
  // A round of records only (Mesh::exchange_records); what a collective that carried its
  // record sent with it is dropped.
  void exchange_signatures(kit::OpContext& ctx, const void* mine, void* everyone,
                           size_t bytes) override;
  bool agreement_enabled() const override;
  // Collectives whose first exchange every rank makes alike, to every peer (the direct
  // allreduce, the flat broadcast), carry their records in it (Mesh::carry_records).
  bool carries_signatures() const override { return true; }
  size_t deferred_async_max_bytes() const override;
  // Tells the other ranks that this one gave up, unless it did so because of abort(). After a
  // timeout, or after a rank gave up on the group before saying why, adds what the awaited ranks
  // reported.
  std::string gave_up(const std::string& failure, const kit::LinkError& error) override;
  // The collective links (sockets and the shared-memory region) go at once: Python may keep the
  // backend object alive long after destroy_process_group().
  void close() override;
  void abort() override;

  // ---- The ops (ops/collectives.cpp, ops/point_to_point.cpp) ---------------------------------
  void broadcast(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
                 const c10d::BroadcastOptions& opts) override;
  void allreduce(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
                 const c10d::AllreduceOptions& opts) override;
  void allgather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
                 const std::vector<at::Tensor>& input_tensors,
                 const c10d::AllgatherOptions& opts) override;
  void allgather_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                      const at::Tensor& input_tensor, const c10d::AllgatherOptions& opts) override;
  void reduce_scatter(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                      const std::vector<std::vector<at::Tensor>>& input_tensors,
                      const c10d::ReduceScatterOptions& opts) override;
  void reduce_scatter_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                           const at::Tensor& input_tensor,
                           const c10d::ReduceScatterOptions& opts) override;
  void barrier(kit::OpContext& ctx, const c10d::BarrierOptions& opts) override;
  void allreduce_coalesced(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
                           const c10d::AllreduceCoalescedOptions& opts) override;
  void allreduce_sparse(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
                        const c10d::AllreduceOptions& opts) override;
  void reduce(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
              const c10d::ReduceOptions& opts) override;
  void allgather_coalesced(kit::OpContext& ctx,
                           const std::vector<std::vector<at::Tensor>>& output_tensor_lists,
                           const std::vector<at::Tensor>& input_tensors,
                           const c10d::AllgatherOptions& opts) override;
  void allgather_into_tensor_coalesced(kit::OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                       const std::vector<at::Tensor>& inputs,
                                       const c10d::AllgatherOptions& opts) override;
  void gather(kit::OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
              const std::vector<at::Tensor>& input_tensors,
              const c10d::GatherOptions& opts) override;
  void scatter(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
               const std::vector<std::vector<at::Tensor>>& input_tensors,
               const c10d::ScatterOptions& opts) override;
  void reduce_scatter_tensor_coalesced(kit::OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                       const std::vector<at::Tensor>& inputs,
                                       const c10d::ReduceScatterOptions& opts) override;
  void alltoall_base(kit::OpContext& ctx, const at::Tensor& output_tensor,
                     const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes,
                     const std::vector<int64_t>& input_split_sizes,
                     const c10d::AllToAllOptions& opts) override;
  void alltoall(kit::OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                const std::vector<at::Tensor>& input_tensors,
                const c10d::AllToAllOptions& opts) override;
  void send(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank,
            int tag) override;
  void recv(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank,
            int tag) override;
  void recv_anysource(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors,
                      int tag) override;

 private:
  // OCCL_DEBUG=INFO: what the group chose, once, as it forms: transports per peer, single copies
  // (or why not), and the thresholds in force (tuning.hpp).
  void log_choices(const std::string& single_copies_off) const;

  MeshRuntime(const kit::Subgroup& subgroup, transport::SubgroupLinks links, const Config& config);
  // Runs the group over `links`: its mesh and its p2p engine.
  void start(int rank, int size, transport::SubgroupLinks links);
  // The collective links for `op`, its agreement check settled, or (`carry`) left to travel
  // with the op's first exchange: the op writes nothing the caller sees before that exchange.
  transport::Mesh& links_for(kit::OpContext& op, bool carry = false);

  std::string where_;  // "group G (rank r of n; ...)", as errors and the INFO log name it
  uint64_t splits_ = 0;  // of this group so far (split() is called from one thread)

  std::mutex mesh_mutex_;  // abort() may come from any thread while close() releases mesh_
  // Shared with the p2p engine's thread, which hands it the other ranks' failure reports.
  std::shared_ptr<transport::Mesh> mesh_;
  std::unique_ptr<transport::P2PEngine> p2p_;
};

}  // namespace occl::runtime
