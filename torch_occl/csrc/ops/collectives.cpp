// occl's collectives: tensors in, algorithms over contiguous buffers.
//
// Each op stages its tensors into contiguous memory (a copy only when a tensor is not
// contiguous), plans its reduction (reduce_plan.hpp), runs an algorithm over the collective
// links, and writes results back into the caller's tensors. The kit checked before that every
// rank calls the same op alike (the spec's `agree:`).
#include "../runtime.hpp"

#include "../algorithms/algorithms.hpp"
#include "../transport/mesh.hpp"
#include "reduce_plan.hpp"
#include "occl_kit/check_helpers.hpp"
#include "occl_kit/reduce.hpp"
#include "occl_kit/staging.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace occl::runtime {
namespace {

using kit::Staged;

// What an op's algorithms need: the collective links, this rank, the group's size and when to
// give up.
struct Call {
  transport::Mesh& mesh;
  int rank;
  int size;
  transport::Deadline deadline;
};

// The dtype a reduction of `count` elements of `type` (per block for a reduce-scatter) runs in.
// float16 and bfloat16 travel as they are when the algorithm meets every rank's input in one
// kernel call (algorithms::rounds_once; the kernel adds in float32 and rounds once) and nothing
// scales before or after it (PREMUL_SUM and AVG would round a second time in 16 bits). Otherwise
// they reduce in a float32 copy (kit::accumulation_dtype), rounded once at the end of the whole
// collective. Every rank chooses alike: the kit checked that they agree on the op.
at::ScalarType reduction_dtype(const Call& ctx, algorithms::Reducing what, int64_t count,
                               const c10d::ReduceOp& op, at::ScalarType type) {
  const at::ScalarType wide = kit::accumulation_dtype(type);
  if (wide == type) return type;
  const ReducePlan p = plan(op, type);
  const bool once = !p.premultiply && !p.average &&
                    algorithms::rounds_once(ctx.mesh, what, static_cast<size_t>(count),
                                            p.reduction);
  return once ? type : wide;
}

at::Tensor block_of(const at::Tensor& blocks, int64_t block, int index) {
  return blocks.narrow(0, block * index, block);
}

// Reduces `blocks` (world_size blocks, contiguous, in the reduction dtype) into `output`
// (one block, contiguous, same dtype): block r of the reduction, with PREMUL_SUM and AVG applied.
// `blocks_are_scratch`: a private copy, which the reduction may scribble on; the caller's input
// is only read, with a scratch buffer for the partial sums when more than two ranks need one.
void reduce_scatter_blocks(Call& ctx, at::Tensor blocks, const at::Tensor& output,
                           const c10d::ReduceOp& op, bool blocks_are_scratch) {
  ReducePlan p = plan(op, blocks.scalar_type());
  if (p.premultiply && !blocks_are_scratch) {
    blocks = blocks.clone();
    blocks_are_scratch = true;
  }
  premultiply(p, blocks);
  at::Tensor partial = blocks_are_scratch ? blocks
                       : ctx.size > 2    ? at::empty_like(blocks)
                                         : at::Tensor();
  algorithms::reduce_scatter(
      ctx.mesh,
      {static_cast<const char*>(data_of(blocks)),
       partial.defined() ? static_cast<char*>(data_of(partial)) : nullptr,
       static_cast<char*>(data_of(output))},
      static_cast<size_t>(output.numel()), p.reduction, ctx.deadline);
  average(p, output, ctx.size);
}

// `buffer`: contiguous, of any shape (a view to one dimension would cost more than an 8-byte op).
void allreduce_flat(Call& ctx, const at::Tensor& buffer, const c10d::ReduceOp& op) {
  ReducePlan p = plan(op, buffer.scalar_type());
  premultiply(p, buffer);
  algorithms::allreduce(ctx.mesh, data_of(buffer), static_cast<size_t>(buffer.numel()),
                        p.reduction, ctx.deadline);
  average(p, buffer, ctx.size);
}

// Allreduces `tensors` as one: through a flat copy in `dtype`.
void allreduce_copy(Call& ctx, const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                    at::ScalarType dtype) {
  at::Tensor flat = flat_copy(tensors, dtype);
  allreduce_flat(ctx, flat, op);
  copy_back(flat, tensors);
}

// `data` cut into consecutive slices of rows[j] rows for each rank j: the SendOps or RecvOps
// (`Op`) of an alltoall.
template <typename Op, typename Byte>
std::vector<Op> slices_of(Byte* data, const std::vector<int64_t>& rows, size_t row_bytes) {
  std::vector<Op> slices;
  for (int peer = 0; peer < static_cast<int>(rows.size()); ++peer) {
    slices.push_back({peer, data, static_cast<size_t>(rows[peer]) * row_bytes});
    data += slices.back().bytes;
  }
  return slices;
}

void allreduce_sparse_tensor(Call& ctx, const at::Tensor& tensor);
void allgather_into(Call& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor);
void reduce_scatter_into(Call& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceOp& op);

}  // namespace

void MeshRuntime::broadcast(kit::OpContext& op, const std::vector<at::Tensor>& tensors,
               const c10d::BroadcastOptions& opts) {
  Call ctx{links_for(op, /*carry=*/true), op.rank, op.size, op.deadline};
  Staged staged(tensors[0]);
  algorithms::broadcast(ctx.mesh, data_of(staged.buffer()), bytes_of(staged.buffer()),
                        static_cast<int>(opts.rootRank), ctx.deadline);
  if (ctx.rank != opts.rootRank) staged.commit();
}

void MeshRuntime::allreduce(kit::OpContext& op, const std::vector<at::Tensor>& tensors,
               const c10d::AllreduceOptions& opts) {
  // PREMUL_SUM scales the tensor in place before it sends it.
  Call ctx{links_for(op, /*carry=*/opts.reduceOp != c10d::ReduceOp::PREMUL_SUM), op.rank,
           op.size, op.deadline};
  const at::Tensor& tensor = tensors[0];
  if (tensor.is_sparse()) return allreduce_sparse_tensor(ctx, tensor);
  const at::ScalarType dtype = reduction_dtype(ctx, algorithms::Reducing::AllReduce,
                                               tensor.numel(), opts.reduceOp,
                                               tensor.scalar_type());
  if (dtype != tensor.scalar_type()) return allreduce_copy(ctx, tensors, opts.reduceOp, dtype);
  Staged staged(tensor);  // in place, unless the tensor is not contiguous
  allreduce_flat(ctx, staged.buffer(), opts.reduceOp);
  staged.commit();
}

void MeshRuntime::allreduce_coalesced(kit::OpContext& op, const std::vector<at::Tensor>& tensors,
                         const c10d::AllreduceCoalescedOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  allreduce_copy(ctx, tensors, opts.reduceOp,
                 reduction_dtype(ctx, algorithms::Reducing::AllReduce, kit::total_numel(tensors),
                                 opts.reduceOp, tensors[0].scalar_type()));
}

void MeshRuntime::reduce(kit::OpContext& op, const std::vector<at::Tensor>& tensors,
            const c10d::ReduceOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& tensor = tensors[0];
  const at::ScalarType dtype = reduction_dtype(ctx, algorithms::Reducing::Reduce,
                                               kit::total_numel(tensors), opts.reduceOp,
                                               tensor.scalar_type());
  ReducePlan p = plan(opts.reduceOp, dtype);
  // The algorithm only reads other ranks' data and writes the result over the root's, so the
  // tensor itself serves where it is contiguous and in the reduction's dtype, unless PREMUL_SUM
  // would scale a tensor that must come out as it went in. Else a private copy.
  const bool in_place = tensors.size() == 1 && tensor.is_contiguous() &&
                        tensor.scalar_type() == dtype && (ctx.rank == root || !p.premultiply);
  at::Tensor flat = in_place ? tensor : flat_copy(tensors, dtype);
  premultiply(p, flat);
  algorithms::reduce(ctx.mesh, data_of(flat), static_cast<size_t>(flat.numel()), p.reduction,
                     root, ctx.deadline);
  if (ctx.rank != root) return;
  average(p, flat, ctx.size);
  if (!in_place) copy_back(flat, tensors);
}

void MeshRuntime::allgather(kit::OpContext& op, const std::vector<std::vector<at::Tensor>>& output_tensors,
               const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  // Each output is received into where it lies and the input sent from where it lies (contiguous
  // copies of those that are not), unless an output shares the input's memory: its bytes would
  // change before every peer has read them.
  const auto& outputs = output_tensors[0];
  const at::Tensor& input_tensor = input_tensors[0];
  const bool overlapping =
      std::any_of(outputs.begin(), outputs.end(),
                  [&](const at::Tensor& output) { return output.is_alias_of(input_tensor); });
  const at::Tensor input = overlapping ? input_tensor.clone(at::MemoryFormat::Contiguous)
                                       : input_tensor.contiguous();
  std::vector<Staged> staged(outputs.begin(), outputs.end());
  std::vector<void*> blocks;
  for (const auto& output : staged) blocks.push_back(output.data());
  algorithms::allgather_into(ctx.mesh, data_of(input), blocks, bytes_of(input), ctx.deadline);
  for (const auto& output : staged) output.commit();
}

void MeshRuntime::allgather_base(kit::OpContext& op, const at::Tensor& output_tensor,
                    const at::Tensor& input_tensor, const c10d::AllgatherOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  allgather_into(ctx, output_tensor, input_tensor);
}

namespace {

void allgather_into(Call& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor) {
  Staged staged(output_tensor);
  const size_t block_bytes = bytes_of(input_tensor);
  char* blocks = static_cast<char*>(staged.data());
  char* mine = blocks + block_bytes * ctx.rank;
  // Raw bytes where they can be: a tensor view and copy_ would cost more than a small op.
  // FSDP passes an input that is a view of its own block of the output: nothing to copy then.
  if (!input_tensor.is_contiguous()) {
    at::Tensor block = staged.buffer().view({-1}).narrow(0, input_tensor.numel() * ctx.rank,
                                                          input_tensor.numel());
    block.view(input_tensor.sizes()).copy_(input_tensor);
  } else if (data_of(input_tensor) != mine) {
    std::memmove(mine, data_of(input_tensor), block_bytes);  // it may overlap another block
  }
  algorithms::allgather(ctx.mesh, blocks, block_bytes, ctx.deadline);
  staged.commit();
}

void reduce_scatter_into(Call& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceOp& op) {
  const at::ScalarType dtype = reduction_dtype(ctx, algorithms::Reducing::ReduceScatter,
                                               output_tensor.numel(), op,
                                               input_tensor.scalar_type());
  if (dtype != input_tensor.scalar_type()) {  // half types in float32
    at::Tensor output = at::empty({output_tensor.numel()}, input_tensor.options().dtype(dtype));
    reduce_scatter_blocks(ctx, flat_copy({input_tensor}, dtype), output, op, true);
    output_tensor.copy_(output.view(output_tensor.sizes()));
    return;
  }
  // The input is only read: no copy of it, however large.
  Staged output(output_tensor);
  at::Tensor input = input_tensor.contiguous();
  bool private_copy = !input.is_same(input_tensor) || output_tensor.is_alias_of(input_tensor);
  if (output_tensor.is_alias_of(input_tensor)) input = input.clone();
  reduce_scatter_blocks(ctx, input, output.buffer(), op, private_copy);
  output.commit();
}

}  // namespace

void MeshRuntime::reduce_scatter(kit::OpContext& op, const std::vector<at::Tensor>& output_tensors,
                    const std::vector<std::vector<at::Tensor>>& input_tensors,
                    const c10d::ReduceScatterOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  const at::Tensor& output = output_tensors[0];
  const auto& inputs = input_tensors[0];
  const at::ScalarType dtype = reduction_dtype(ctx, algorithms::Reducing::ReduceScatter,
                                               output.numel(), opts.reduceOp,
                                               output.scalar_type());
  ReducePlan p = plan(opts.reduceOp, dtype);
  if (dtype != output.scalar_type() || p.premultiply) {  // in a private copy
    at::Tensor blocks = flat_copy(inputs, dtype);
    at::Tensor reduced = at::empty({output.numel()}, blocks.options());
    reduce_scatter_blocks(ctx, blocks, reduced, opts.reduceOp, true);
    output.copy_(reduced.view(output.sizes()));
    return;
  }
  // Each input is read where it lies (a contiguous copy of one that is not), unless the output
  // shares its memory: the result would change it before every peer has read it.
  const bool overlapping = std::any_of(inputs.begin(), inputs.end(), [&](const at::Tensor& input) {
    return input.is_alias_of(output);
  });
  std::vector<at::Tensor> blocks;
  std::vector<const char*> block_data;
  for (const auto& input : inputs) {
    blocks.push_back(overlapping ? input.clone(at::MemoryFormat::Contiguous) : input.contiguous());
    block_data.push_back(static_cast<const char*>(data_of(blocks.back())));
  }
  Staged staged(output);
  algorithms::reduce_scatter_list(ctx.mesh, block_data, static_cast<char*>(staged.data()),
                                  static_cast<size_t>(output.numel()), p.reduction, ctx.deadline);
  average(p, staged.buffer(), ctx.size);
  staged.commit();
}

void MeshRuntime::reduce_scatter_base(kit::OpContext& op, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  reduce_scatter_into(ctx, output_tensor, input_tensor, opts.reduceOp);
}

void MeshRuntime::barrier(kit::OpContext& op, const c10d::BarrierOptions&) {
  if (op.all_ranks_entered) return;  // the signature exchange was the barrier
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  algorithms::barrier(ctx.mesh, ctx.deadline);
}

}  // namespace occl::runtime

namespace occl::runtime {

void MeshRuntime::allgather_coalesced(kit::OpContext& op,
                         const std::vector<std::vector<at::Tensor>>& output_tensor_lists,
                         const std::vector<at::Tensor>& input_tensors,
                         const c10d::AllgatherOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  // All inputs travel as one block per rank: this rank's inputs, flattened and concatenated.
  int64_t block = kit::total_numel(input_tensors);
  at::Tensor blocks = at::empty({block * ctx.size}, input_tensors[0].options());
  int64_t offset = block * ctx.rank;
  for (const auto& t : input_tensors) {
    blocks.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  algorithms::allgather(ctx.mesh, data_of(blocks), block * blocks.element_size(), ctx.deadline);
  for (int r = 0; r < ctx.size; ++r) copy_back(block_of(blocks, block, r), output_tensor_lists[r]);
}

// Every rank contributes a different number of entries: exchange the counts, then allgather
// blocks padded to the largest count, and let coalesce() sum duplicate indices (the same way on
// every rank, since every rank then holds the same entries in the same order).
void MeshRuntime::allreduce_sparse(kit::OpContext& op, const std::vector<at::Tensor>& tensors,
                      const c10d::AllreduceOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  allreduce_sparse_tensor(ctx, tensors[0]);
}

namespace {

void allreduce_sparse_tensor(Call& ctx, const at::Tensor& tensor) {
  // Duplicates are summed by coalesce(): in float32 for half types, like every other reduction.
  at::Tensor input = tensor.to(kit::accumulation_dtype(tensor.scalar_type())).coalesce();
  at::Tensor indices = input._indices();
  at::Tensor values = input._values();
  const int n = ctx.size;

  at::Tensor counts = at::zeros({n}, at::kLong);
  counts[ctx.rank] = indices.size(1);
  algorithms::allgather(ctx.mesh, data_of(counts), sizeof(int64_t), ctx.deadline);
  int64_t most = counts.max().item<int64_t>();

  auto gather_padded = [&](const at::Tensor& mine, int64_t entry_dim) {
    std::vector<int64_t> shape = mine.sizes().vec();
    shape[entry_dim] = most;
    shape.insert(shape.begin(), n);
    at::Tensor blocks = at::zeros(shape, mine.options());
    blocks.select(0, ctx.rank).narrow(entry_dim, 0, mine.size(entry_dim)).copy_(mine);
    algorithms::allgather(ctx.mesh, data_of(blocks), bytes_of(blocks) / n, ctx.deadline);
    std::vector<at::Tensor> parts;
    for (int r = 0; r < n; ++r) {
      parts.push_back(blocks.select(0, r).narrow(entry_dim, 0, counts[r].item<int64_t>()));
    }
    return at::cat(parts, entry_dim);
  };
  at::Tensor all_indices = gather_padded(indices, 1);
  at::Tensor all_values = gather_padded(values, 0);
  tensor.copy_(at::sparse_coo_tensor(all_indices, all_values, tensor.sizes())
                   .coalesce()
                   .to(tensor.scalar_type()));
}

}  // namespace

void MeshRuntime::allgather_into_tensor_coalesced(kit::OpContext& op, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  for (size_t i = 0; i < outputs.size(); ++i) allgather_into(ctx, outputs[i], inputs[i]);
}

void MeshRuntime::reduce_scatter_tensor_coalesced(kit::OpContext& op, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::ReduceScatterOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  for (size_t i = 0; i < outputs.size(); ++i) {
    reduce_scatter_into(ctx, outputs[i], inputs[i], opts.reduceOp);
  }
}

void MeshRuntime::gather(kit::OpContext& op, const std::vector<std::vector<at::Tensor>>& output_tensors,
            const std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  int root = static_cast<int>(opts.rootRank);
  at::Tensor input = input_tensors[0].contiguous();
  if (ctx.rank != root) {
    return algorithms::gather(ctx.mesh, data_of(input), {}, bytes_of(input), root, ctx.deadline);
  }
  const auto& outputs = output_tensors[0];
  std::vector<Staged> staged(outputs.begin(), outputs.end());
  std::vector<void*> blocks;
  for (const auto& s : staged) blocks.push_back(data_of(s.buffer()));
  algorithms::gather(ctx.mesh, data_of(input), blocks, bytes_of(input), root, ctx.deadline);
  outputs[root].copy_(input.view(outputs[root].sizes()));
  for (int r = 0; r < ctx.size; ++r) {
    if (r != root) staged[r].commit();
  }
}

void MeshRuntime::scatter(kit::OpContext& op, const std::vector<at::Tensor>& output_tensors,
             const std::vector<std::vector<at::Tensor>>& input_tensors,
             const c10d::ScatterOptions& opts) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  int root = static_cast<int>(opts.rootRank);
  Staged output(output_tensors[0]);
  std::vector<at::Tensor> inputs;  // contiguous, alive until the sends are done
  std::vector<const void*> blocks;
  if (ctx.rank == root) {
    for (const auto& t : input_tensors[0]) {
      inputs.push_back(t.contiguous());
      blocks.push_back(data_of(inputs.back()));
    }
  }
  algorithms::scatter(ctx.mesh, blocks, data_of(output.buffer()), bytes_of(output.buffer()), root,
                      ctx.deadline);
  output.commit();
}

void MeshRuntime::alltoall_base(kit::OpContext& op, const at::Tensor& output_tensor,
                   const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes,
                   const std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  // An output that shares memory with the input would overwrite slices not yet sent.
  at::Tensor input = output_tensor.is_alias_of(input_tensor) ? input_tensor.clone(at::MemoryFormat::Contiguous)
                                                             : input_tensor.contiguous();
  Staged output(output_tensor);
  // Split sizes may differ from rank to rank; what each pair exchanges must agree.
  algorithms::alltoall(
      ctx.mesh,
      slices_of<transport::SendOp>(static_cast<const char*>(data_of(input)),
                                   kit::rows_per_rank(input_split_sizes, input_tensor, ctx.size),
                                   kit::row_bytes_of(input_tensor)),
      slices_of<transport::RecvOp>(static_cast<char*>(data_of(output.buffer())),
                                   kit::rows_per_rank(output_split_sizes, output_tensor, ctx.size),
                                   kit::row_bytes_of(output_tensor)),
      ctx.deadline);
  output.commit();
}

void MeshRuntime::alltoall(kit::OpContext& op, const std::vector<at::Tensor>& output_tensors,
              const std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions&) {
  Call ctx{links_for(op), op.rank, op.size, op.deadline};
  // Each tensor is sent from, or received into, where it lies (a contiguous copy of one that is
  // not contiguous). Tensor sizes may differ from rank to rank; what each pair exchanges must
  // agree. An output that shares memory with an input would overwrite bytes not yet sent.
  const bool overlapping = std::any_of(
      output_tensors.begin(), output_tensors.end(), [&](const at::Tensor& output) {
        return std::any_of(input_tensors.begin(), input_tensors.end(),
                           [&](const at::Tensor& input) { return output.is_alias_of(input); });
      });
  std::vector<at::Tensor> inputs;
  for (const auto& t : input_tensors) {
    inputs.push_back(overlapping ? t.clone(at::MemoryFormat::Contiguous) : t.contiguous());
  }
  std::vector<Staged> outputs(output_tensors.begin(), output_tensors.end());
  std::vector<transport::SendOp> sends;
  std::vector<transport::RecvOp> receives;
  for (int peer = 0; peer < ctx.size; ++peer) {
    sends.push_back({peer, data_of(inputs[peer]), bytes_of(inputs[peer])});
    receives.push_back({peer, outputs[peer].data(), outputs[peer].bytes()});
  }
  algorithms::alltoall(ctx.mesh, sends, receives, ctx.deadline);
  for (const auto& output : outputs) output.commit();
}

}  // namespace occl::runtime
