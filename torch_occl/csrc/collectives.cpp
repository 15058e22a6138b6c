// The runtime functions the spec's ops name: tensors in, algorithms over contiguous buffers.
//
// Each function stages its tensors into contiguous memory (a copy only when a tensor is not
// contiguous), maps the dtype and reduce op onto the kernels' enums, runs an algorithm, and
// writes results back into the caller's tensors.
#include "runtime.hpp"

#include "algorithms/algorithms.hpp"
#include "kernels/reduce.hpp"
#include "transport/mesh.hpp"
#include "transport/p2p.hpp"
#include "tuning.hpp"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <optional>

namespace occl::runtime {
namespace {

std::optional<kernels::DType> kernel_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return kernels::DType::Float32;
    case at::kDouble: return kernels::DType::Float64;
    case at::kHalf: return kernels::DType::Float16;
    case at::kBFloat16: return kernels::DType::BFloat16;
    case at::kChar: return kernels::DType::Int8;
    case at::kByte: return kernels::DType::UInt8;
    case at::kShort: return kernels::DType::Int16;
    case at::kInt: return kernels::DType::Int32;
    case at::kLong: return kernels::DType::Int64;
    case at::kBool: return kernels::DType::Bool;
    default: return std::nullopt;
  }
}

// How a c10d reduce op runs: an optional scaling of each input (PREMUL_SUM), a kernel op, and an
// optional division of the result by the world size (AVG).
struct ReducePlan {
  algorithms::Reduction reduction;
  std::optional<double> premultiply;
  bool average = false;
};

double premul_factor(const c10d::ReduceOp& op) {
  auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "PREMUL_SUM arrived without its factor");
  if (supplement->tensor_factor.defined()) return supplement->tensor_factor.item<double>();
  return supplement->double_factor;
}

// Only called after the spec's reduce_op_supports_dtype check passed.
ReducePlan plan(const c10d::ReduceOp& op, at::ScalarType type) {
  kernels::DType dtype = *kernel_dtype(type);
  bool is_bool = dtype == kernels::DType::Bool;
  ReducePlan p{{dtype, kernels::ReduceOp::Sum}, std::nullopt, false};
  switch (op.op_) {
    case c10d::ReduceOp::SUM: p.reduction.op = is_bool ? kernels::ReduceOp::BitOr : kernels::ReduceOp::Sum; break;
    case c10d::ReduceOp::AVG: p.average = true; break;
    case c10d::ReduceOp::PREMUL_SUM: p.premultiply = premul_factor(op); break;
    case c10d::ReduceOp::PRODUCT: p.reduction.op = is_bool ? kernels::ReduceOp::BitAnd : kernels::ReduceOp::Product; break;
    case c10d::ReduceOp::MIN: p.reduction.op = is_bool ? kernels::ReduceOp::BitAnd : kernels::ReduceOp::Min; break;
    case c10d::ReduceOp::MAX: p.reduction.op = is_bool ? kernels::ReduceOp::BitOr : kernels::ReduceOp::Max; break;
    case c10d::ReduceOp::BAND: p.reduction.op = kernels::ReduceOp::BitAnd; break;
    case c10d::ReduceOp::BOR: p.reduction.op = kernels::ReduceOp::BitOr; break;
    case c10d::ReduceOp::BXOR: p.reduction.op = kernels::ReduceOp::BitXor; break;
    default: TORCH_CHECK(false, "unknown reduce op ", static_cast<int>(op.op_));
  }
  return p;
}

void* data_of(const at::Tensor& t) { return t.data_ptr(); }
size_t bytes_of(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// `user` itself when contiguous, else a contiguous copy; `commit()` writes a copy back.
class Staged {
 public:
  explicit Staged(const at::Tensor& user) : user_(user), buffer_(user.contiguous()) {}
  const at::Tensor& buffer() const { return buffer_; }
  void commit() const {
    if (!buffer_.is_same(user_)) user_.copy_(buffer_);
  }

 private:
  at::Tensor user_;
  at::Tensor buffer_;
};

// The dtype a reduction runs in: float32 for float16/bfloat16, so that a whole collective adds
// in float32 and rounds once at the end, whatever the algorithm and the ring position.
at::ScalarType accumulation_dtype(at::ScalarType type) {
  return type == at::kHalf || type == at::kBFloat16 ? at::kFloat : type;
}

// A contiguous copy of `tensors` (flattened, concatenated) in their accumulation dtype.
at::Tensor accumulation_copy(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  at::Tensor flat = at::empty(
      {total}, tensors[0].options().dtype(accumulation_dtype(tensors[0].scalar_type())));
  int64_t offset = 0;
  for (const auto& t : tensors) {
    flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

// The inverse of accumulation_copy: writes each slice of `flat` back into its tensor.
void copy_back(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// The part of a reduction before and after the algorithm: PREMUL_SUM scales each rank's input,
// AVG divides the result by the world size.
void premultiply(const ReducePlan& p, const at::Tensor& data) {
  if (p.premultiply) {
    kernels::scale(data_of(data), data.numel(), p.reduction.dtype, *p.premultiply);
  }
}

void average(const ReducePlan& p, const at::Tensor& data, int world_size) {
  if (p.average) kernels::divide(data_of(data), data.numel(), p.reduction.dtype, world_size);
}

at::Tensor block_of(const at::Tensor& blocks, int64_t block, int index) {
  return blocks.narrow(0, block * index, block);
}

// Reduces `blocks` (world_size blocks, contiguous, in the accumulation dtype) into `output`
// (one block, contiguous, same dtype): block r of the reduction, with PREMUL_SUM and AVG applied.
// `blocks_are_scratch`: a private copy, which the reduction may scribble on; the caller's input
// is only read, with a scratch buffer for the partial sums when more than two ranks need one.
void reduce_scatter_blocks(OpContext& ctx, at::Tensor blocks, const at::Tensor& output,
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

void allreduce_flat(OpContext& ctx, const at::Tensor& flat, const c10d::ReduceOp& op) {
  ReducePlan p = plan(op, flat.scalar_type());
  premultiply(p, flat);
  algorithms::allreduce(ctx.mesh, data_of(flat), static_cast<size_t>(flat.numel()), p.reduction,
                        ctx.deadline);
  average(p, flat, ctx.size);
}

// Allreduces `tensors` as one: through a flat copy in the accumulation dtype.
void allreduce_copy(OpContext& ctx, const std::vector<at::Tensor>& tensors,
                    const c10d::ReduceOp& op) {
  at::Tensor flat = accumulation_copy(tensors);
  allreduce_flat(ctx, flat, op);
  copy_back(flat, tensors);
}

// The rows of `tensor` (its first dimension) that each rank's slice has, per split_sizes rules.
std::vector<int64_t> rows_per_rank(const std::vector<int64_t>& split_sizes,
                                   const at::Tensor& tensor, int world_size) {
  if (!split_sizes.empty()) return split_sizes;
  int64_t rows = tensor.dim() == 0 ? tensor.numel() : tensor.size(0);
  return std::vector<int64_t>(world_size, rows / world_size);
}

std::vector<algorithms::Slice> slices_of(const std::vector<int64_t>& rows, size_t row_bytes) {
  std::vector<algorithms::Slice> slices;
  size_t offset = 0;
  for (int64_t count : rows) {
    slices.push_back({offset, static_cast<size_t>(count) * row_bytes});
    offset += slices.back().bytes;
  }
  return slices;
}

size_t row_bytes_of(const at::Tensor& t) {
  if (t.dim() == 0 || t.size(0) == 0) return t.element_size();
  return bytes_of(t) / static_cast<size_t>(t.size(0));
}

// "float32"; "float32 sparse" for a sparse tensor, which travels unlike a dense one.
std::string dtype_label(const at::Tensor& tensor) {
  auto dtype = kernel_dtype(tensor.scalar_type());
  std::string name = dtype ? kernels::dtype_name(*dtype) : c10::toString(tensor.scalar_type());
  return tensor.is_sparse() ? name + " sparse" : name;
}

// A sparse tensor's entries land by their indices, so its shape must agree, not just its size.
std::vector<int64_t> sparse_shape(const at::Tensor& tensor) {
  return tensor.is_sparse() ? tensor.sizes().vec() : std::vector<int64_t>{};
}

// The first step of every collective: all ranks check that they run the same one, alike (see
// transport::Collective). Callers fill in what must agree; the op and sequence come from ctx.
void agree(OpContext& ctx, transport::Collective collective) {
  if (ctx.size == 1 || !Tuning::get().check_signatures) return;
  std::string op = ctx.label;
  collective.op = op.substr(op.find('.') + 1);  // "occl.allreduce" -> "allreduce"
  collective.sequence = ctx.sequence;
  ctx.mesh.agree(collective, ctx.deadline);
}

// PREMUL_SUM's factor may differ from rank to rank (each scales its own input), but whether it
// comes as a tensor or a number is part of the call.
std::string reduction_label(const c10d::ReduceOp& op) {
  std::string name = reduce_op_name(op);
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return name;
  auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  if (supplement == nullptr) return name + "(no factor)";
  return name + (supplement->tensor_factor.defined() ? "(tensor factor)" : "(scalar factor)");
}

std::vector<int64_t> numels_of(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> numels;
  for (const auto& t : tensors) numels.push_back(t.numel());
  return numels;
}

std::vector<int64_t> bytes_of(const std::vector<algorithms::Slice>& slices) {
  std::vector<int64_t> bytes;
  for (const auto& slice : slices) bytes.push_back(static_cast<int64_t>(slice.bytes));
  return bytes;
}

int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  return total;
}

void allreduce_sparse_tensor(OpContext& ctx, const at::Tensor& tensor);
void allgather_into(OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor);
void reduce_scatter_into(OpContext& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceOp& op);

}  // namespace

const char* reduce_op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN";
  }
}

void broadcast(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::BroadcastOptions& opts) {
  agree(ctx, {.dtype = dtype_label(tensors[0]), .count = tensors[0].numel(),
               .root = opts.rootRank});
  Staged staged(tensors[0]);
  algorithms::broadcast(ctx.mesh, data_of(staged.buffer()), bytes_of(staged.buffer()),
                        static_cast<int>(opts.rootRank), ctx.deadline);
  if (ctx.rank != opts.rootRank) staged.commit();
}

void allreduce(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = tensors[0];
  agree(ctx, {.dtype = dtype_label(tensor), .count = tensor.numel(),
               .reduction = reduction_label(opts.reduceOp), .shape = sparse_shape(tensor)});
  if (tensor.is_sparse()) return allreduce_sparse_tensor(ctx, tensor);
  if (accumulation_dtype(tensor.scalar_type()) != tensor.scalar_type()) {
    return allreduce_copy(ctx, tensors, opts.reduceOp);
  }
  Staged staged(tensor);  // in place, unless the tensor is not contiguous
  allreduce_flat(ctx, staged.buffer().view({-1}), opts.reduceOp);
  staged.commit();
}

void allreduce_coalesced(OpContext& ctx, const std::vector<at::Tensor>& tensors,
                         const c10d::AllreduceCoalescedOptions& opts) {
  agree(ctx, {.dtype = dtype_label(tensors[0]), .count = total_numel(tensors),
               .reduction = reduction_label(opts.reduceOp), .tensor_numels = numels_of(tensors)});
  allreduce_copy(ctx, tensors, opts.reduceOp);
}

void reduce(OpContext& ctx, const std::vector<at::Tensor>& tensors,
            const c10d::ReduceOptions& opts) {
  agree(ctx, {.dtype = dtype_label(tensors[0]), .count = total_numel(tensors),
               .root = opts.rootRank, .reduction = reduction_label(opts.reduceOp)});
  // A private copy on every rank: non-root tensors must come out as they went in.
  at::Tensor flat = accumulation_copy(tensors);
  ReducePlan p = plan(opts.reduceOp, flat.scalar_type());
  premultiply(p, flat);
  int root = static_cast<int>(opts.rootRank);
  algorithms::reduce(ctx.mesh, data_of(flat), static_cast<size_t>(flat.numel()), p.reduction,
                     root, ctx.deadline);
  if (ctx.rank != root) return;
  average(p, flat, ctx.size);
  copy_back(flat, tensors);
}

void allgather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
               const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions&) {
  const at::Tensor& input = input_tensors[0];
  agree(ctx, {.dtype = dtype_label(input), .count = input.numel()});
  int64_t block = input.numel();
  at::Tensor blocks = at::empty({block * ctx.size}, input.options());
  block_of(blocks, block, ctx.rank).view(input.sizes()).copy_(input);
  algorithms::allgather(ctx.mesh, data_of(blocks), bytes_of(input), ctx.deadline);
  const auto& outputs = output_tensors[0];
  for (int r = 0; r < ctx.size; ++r) {
    outputs[r].copy_(block_of(blocks, block, r).view(outputs[r].sizes()));
  }
}

void allgather_base(OpContext& ctx, const at::Tensor& output_tensor,
                    const at::Tensor& input_tensor, const c10d::AllgatherOptions&) {
  agree(ctx, {.dtype = dtype_label(input_tensor), .count = input_tensor.numel()});
  allgather_into(ctx, output_tensor, input_tensor);
}

namespace {

void allgather_into(OpContext& ctx, const at::Tensor& output_tensor, const at::Tensor& input_tensor) {
  Staged staged(output_tensor);
  int64_t block = input_tensor.numel();
  at::Tensor blocks = staged.buffer().view({-1});
  // FSDP passes an input that is a view of its own block of the output: copy_ then is a no-op.
  block_of(blocks, block, ctx.rank).view(input_tensor.sizes()).copy_(input_tensor);
  algorithms::allgather(ctx.mesh, data_of(blocks), bytes_of(input_tensor), ctx.deadline);
  staged.commit();
}

void reduce_scatter_into(OpContext& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceOp& op) {
  const at::ScalarType dtype = accumulation_dtype(input_tensor.scalar_type());
  if (dtype != input_tensor.scalar_type()) {  // half types: the whole reduction in float32
    at::Tensor output = at::empty({output_tensor.numel()}, input_tensor.options().dtype(dtype));
    reduce_scatter_blocks(ctx, accumulation_copy({input_tensor}), output, op, true);
    output_tensor.copy_(output.view(output_tensor.sizes()));
    return;
  }
  // The input is only read: no copy of it, however large.
  Staged output(output_tensor);
  at::Tensor input = input_tensor.contiguous();
  bool private_copy = !input.is_same(input_tensor) || output_tensor.is_alias_of(input_tensor);
  if (output_tensor.is_alias_of(input_tensor)) input = input.clone();
  reduce_scatter_blocks(ctx, input.view({-1}), output.buffer().view({-1}), op, private_copy);
  output.commit();
}

}  // namespace

void reduce_scatter(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                    const std::vector<std::vector<at::Tensor>>& input_tensors,
                    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = output_tensors[0];
  agree(ctx, {.dtype = dtype_label(output), .count = output.numel(),
               .reduction = reduction_label(opts.reduceOp)});
  at::Tensor blocks = accumulation_copy(input_tensors[0]);
  at::Tensor reduced = at::empty({output.numel()}, blocks.options());
  reduce_scatter_blocks(ctx, blocks, reduced, opts.reduceOp, true);
  output.copy_(reduced.view(output.sizes()));
}

void reduce_scatter_base(OpContext& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  agree(ctx, {.dtype = dtype_label(output_tensor), .count = output_tensor.numel(),
               .reduction = reduction_label(opts.reduceOp)});
  reduce_scatter_into(ctx, output_tensor, input_tensor, opts.reduceOp);
}

void barrier(OpContext& ctx, const c10d::BarrierOptions&) {
  agree(ctx, {});
  algorithms::barrier(ctx.mesh, ctx.deadline);
}

}  // namespace occl::runtime

namespace occl::runtime {

bool has_overlapping_elements(const at::Tensor& tensor) {
  // Only strided tensors can alias themselves; a sparse tensor's result replaces it whole.
  return tensor.layout() == c10::kStrided &&
         at::has_internal_overlap(tensor) == at::MemOverlap::Yes;
}

size_t slice_bytes(const std::vector<int64_t>& split_sizes, const at::Tensor& tensor, int index,
                   int world_size) {
  return static_cast<size_t>(rows_per_rank(split_sizes, tensor, world_size)[index]) *
         row_bytes_of(tensor);
}

std::string split_sizes_unfit_reason(const std::vector<int64_t>& sizes, const at::Tensor& tensor,
                                     int world_size) {
  int64_t rows = tensor.dim() == 0 ? tensor.numel() : tensor.size(0);
  if (sizes.empty()) {
    if (rows % world_size == 0) return "";
    return "no split sizes means equal splits, but its first dimension, " + std::to_string(rows) +
           ", does not divide by the world size, " + std::to_string(world_size);
  }
  if (sizes.size() != static_cast<size_t>(world_size)) {
    return "it has " + std::to_string(sizes.size()) + " split sizes, expected " +
           std::to_string(world_size) + " (one per rank) or none (equal splits)";
  }
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      return "split size " + std::to_string(i) + " is " + std::to_string(sizes[i]) +
             ", expected >= 0";
    }
    total += sizes[i];
  }
  if (total == rows) return "";
  return "the split sizes sum to " + std::to_string(total) + ", expected its first dimension, " +
         std::to_string(rows);
}

void allgather_coalesced(OpContext& ctx,
                         const std::vector<std::vector<at::Tensor>>& output_tensor_lists,
                         const std::vector<at::Tensor>& input_tensors,
                         const c10d::AllgatherOptions&) {
  // All inputs travel as one block per rank: this rank's inputs, flattened and concatenated.
  int64_t block = total_numel(input_tensors);
  agree(ctx, {.dtype = dtype_label(input_tensors[0]), .count = block,
               .tensor_numels = numels_of(input_tensors)});
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
void allreduce_sparse(OpContext& ctx, const std::vector<at::Tensor>& tensors,
                      const c10d::AllreduceOptions& opts) {
  agree(ctx, {.dtype = dtype_label(tensors[0]), .count = tensors[0].numel(),
               .reduction = reduction_label(opts.reduceOp), .shape = sparse_shape(tensors[0])});
  allreduce_sparse_tensor(ctx, tensors[0]);
}

namespace {

void allreduce_sparse_tensor(OpContext& ctx, const at::Tensor& tensor) {
  // Duplicates are summed by coalesce(): in float32 for half types, like every other reduction.
  at::Tensor input = tensor.to(accumulation_dtype(tensor.scalar_type())).coalesce();
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

void allgather_into_tensor_coalesced(OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions&) {
  agree(ctx, {.dtype = dtype_label(inputs[0]), .count = total_numel(inputs),
               .tensor_numels = numels_of(inputs)});
  for (size_t i = 0; i < outputs.size(); ++i) allgather_into(ctx, outputs[i], inputs[i]);
}

void reduce_scatter_tensor_coalesced(OpContext& ctx, const std::vector<at::Tensor>& outputs,
                                     const std::vector<at::Tensor>& inputs,
                                     const c10d::ReduceScatterOptions& opts) {
  agree(ctx, {.dtype = dtype_label(outputs[0]), .count = total_numel(outputs),
               .reduction = reduction_label(opts.reduceOp), .tensor_numels = numels_of(outputs)});
  for (size_t i = 0; i < outputs.size(); ++i) {
    reduce_scatter_into(ctx, outputs[i], inputs[i], opts.reduceOp);
  }
}

void gather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
            const std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  int root = static_cast<int>(opts.rootRank);
  agree(ctx, {.dtype = dtype_label(input_tensors[0]),
               .count = input_tensors[0].numel(), .root = root});
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

void scatter(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
             const std::vector<std::vector<at::Tensor>>& input_tensors,
             const c10d::ScatterOptions& opts) {
  int root = static_cast<int>(opts.rootRank);
  agree(ctx, {.dtype = dtype_label(output_tensors[0]),
               .count = output_tensors[0].numel(), .root = root});
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

void alltoall_base(OpContext& ctx, const at::Tensor& output_tensor,
                   const at::Tensor& input_tensor, const std::vector<int64_t>& output_split_sizes,
                   const std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  // Split sizes may differ from rank to rank; what each pair exchanges must agree.
  auto sends = slices_of(rows_per_rank(input_split_sizes, input_tensor, ctx.size),
                         row_bytes_of(input_tensor));
  auto receives = slices_of(rows_per_rank(output_split_sizes, output_tensor, ctx.size),
                            row_bytes_of(output_tensor));
  agree(ctx, {.dtype = dtype_label(input_tensor), .bytes_to = bytes_of(sends),
               .bytes_from = bytes_of(receives)});
  // An output that shares memory with the input would overwrite slices not yet sent.
  at::Tensor input = output_tensor.is_alias_of(input_tensor) ? input_tensor.clone(at::MemoryFormat::Contiguous)
                                                             : input_tensor.contiguous();
  Staged output(output_tensor);
  algorithms::alltoall(ctx.mesh, static_cast<const char*>(data_of(input)), sends,
                       static_cast<char*>(data_of(output.buffer())), receives, ctx.deadline);
  output.commit();
}

void alltoall(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
              const std::vector<at::Tensor>& input_tensors, const c10d::AllToAllOptions&) {
  // Every peer's tensor travels as a slice of one flat buffer each way. Tensor sizes may differ
  // from rank to rank; what each pair exchanges must agree.
  auto flat_slices = [](const std::vector<at::Tensor>& tensors) {
    return slices_of(numels_of(tensors), tensors[0].element_size());
  };
  auto sends = flat_slices(input_tensors), receives = flat_slices(output_tensors);
  agree(ctx, {.dtype = dtype_label(input_tensors[0]), .bytes_to = bytes_of(sends),
               .bytes_from = bytes_of(receives)});
  std::vector<at::Tensor> flattened;
  for (const auto& t : input_tensors) flattened.push_back(t.reshape({-1}));
  at::Tensor send = at::cat(flattened);
  at::Tensor recv = at::empty({total_numel(output_tensors)}, output_tensors[0].options());
  algorithms::alltoall(ctx.mesh, static_cast<const char*>(data_of(send)), sends,
                       static_cast<char*>(data_of(recv)), receives, ctx.deadline);
  copy_back(recv, output_tensors);
}

void send(OpContext& ctx, const std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  at::Tensor data = tensors[0].contiguous();
  ctx.p2p.send(dst_rank, tag, data_of(data), bytes_of(data), ctx.deadline,
               [data, done = ctx.done](std::exception_ptr error, int source) {
                 done(error, source);
               });
}

void recv(OpContext& ctx, const std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  Staged staged(tensors[0]);
  ctx.p2p.recv(src_rank, tag, data_of(staged.buffer()), bytes_of(staged.buffer()), ctx.deadline,
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

void recv_anysource(OpContext& ctx, const std::vector<at::Tensor>& tensors, int tag) {
  recv(ctx, tensors, transport::P2PEngine::kAnySource, tag);
}

}  // namespace occl::runtime
