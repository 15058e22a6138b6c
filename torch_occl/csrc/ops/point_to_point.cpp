// occl's point-to-point ops: handed to the p2p engine (transport/p2p.hpp) on the caller's thread,
// which completes them through ctx.done; a thread waiting for one moves the messages itself for a
// while (the engine's driver).
#include "../runtime.hpp"

#include "../transport/p2p.hpp"
#include "reduce_plan.hpp"
#include "occl_kit/staging.hpp"

namespace occl::runtime {

using kit::Staged;

void MeshRuntime::send(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  at::Tensor data = tensors[0].contiguous();
  ctx.progress_while_waiting = p2p_->driver();
  ctx.wait_without_progress = p2p_->handoff();
  p2p_->send(dst_rank, tag, data_of(data), bytes_of(data), ctx.deadline,
               [data, done = ctx.done](std::exception_ptr error, int source) {
                 done(error, source);
               });
}

void MeshRuntime::recv(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  Staged staged(tensors[0]);
  ctx.progress_while_waiting = p2p_->driver();
  ctx.wait_without_progress = p2p_->handoff();
  p2p_->recv(src_rank, tag, data_of(staged.buffer()), bytes_of(staged.buffer()), ctx.deadline,
               [staged, done = ctx.done](std::exception_ptr error, int source) {
                 if (!error) {
                   try {
                     staged.commit();
                   } catch (...) {
                     error = std::current_exception();
                   }
                 }
                 done(error, source);
               });
}

void MeshRuntime::recv_anysource(kit::OpContext& ctx, const std::vector<at::Tensor>& tensors, int tag) {
  recv(ctx, tensors, transport::P2PEngine::kAnySource, tag);
}

}  // namespace occl::runtime
