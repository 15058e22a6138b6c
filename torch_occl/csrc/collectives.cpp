// The runtime functions the spec's ops name: tensors in, algorithms over contiguous buffers.
//
// Each function stages its tensors into contiguous memory (a copy only when a tensor is not
// contiguous), maps the dtype and reduce op onto the kernels' enums, runs an algorithm, and
// writes results back into the caller's tensors.
#include "runtime.hpp"

#include "algorithms/algorithms.hpp"
#include "kernels/reduce.hpp"

#include <ATen/ops/empty.h>
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

// Reduces `blocks` (world_size blocks of `block` elements, contiguous, ours to scribble on).
// Rank r's block r ends reduced, with PREMUL_SUM and AVG applied.
void reduce_scatter_blocks(OpContext& ctx, const at::Tensor& blocks, int64_t block,
                           const c10d::ReduceOp& op) {
  ReducePlan p = plan(op, blocks.scalar_type());
  size_t count = static_cast<size_t>(block);
  if (p.premultiply) {
    kernels::scale(data_of(blocks), count * ctx.size, p.reduction.dtype, *p.premultiply);
  }
  algorithms::reduce_scatter(ctx.mesh, data_of(blocks), count, p.reduction, ctx.deadline);
  if (p.average) {
    void* mine = static_cast<char*>(data_of(blocks)) + count * ctx.rank * blocks.element_size();
    kernels::divide(mine, count, p.reduction.dtype, ctx.size);
  }
}

at::Tensor block_of(const at::Tensor& blocks, int64_t block, int index) {
  return blocks.narrow(0, block * index, block);
}

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

const char* reduce_op_unsupported_reason(const c10d::ReduceOp& op, at::ScalarType type) {
  auto dtype = kernel_dtype(type);
  if (!dtype) {
    return "occl reduces float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64 "
           "and bool";
  }
  switch (op.op_) {
    case c10d::ReduceOp::AVG:
      return *dtype == kernels::DType::Bool ? "AVG needs a numeric dtype" : nullptr;
    case c10d::ReduceOp::PREMUL_SUM:
      return kernels::is_floating(*dtype) ? nullptr : "PREMUL_SUM needs a floating dtype";
    case c10d::ReduceOp::BAND: return kernels::unsupported_reason(kernels::ReduceOp::BitAnd, *dtype);
    case c10d::ReduceOp::BOR: return kernels::unsupported_reason(kernels::ReduceOp::BitOr, *dtype);
    case c10d::ReduceOp::BXOR: return kernels::unsupported_reason(kernels::ReduceOp::BitXor, *dtype);
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX: return nullptr;
    default: return "unknown reduce op";
  }
}

void broadcast(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::BroadcastOptions& opts) {
  Staged staged(tensors[0]);
  algorithms::broadcast(ctx.mesh, data_of(staged.buffer()), bytes_of(staged.buffer()),
                        static_cast<int>(opts.rootRank), ctx.deadline);
  if (ctx.rank != opts.rootRank) staged.commit();
}

void allreduce(OpContext& ctx, const std::vector<at::Tensor>& tensors,
               const c10d::AllreduceOptions& opts) {
  Staged staged(tensors[0]);
  const at::Tensor& buffer = staged.buffer();
  size_t count = static_cast<size_t>(buffer.numel());
  ReducePlan p = plan(opts.reduceOp, buffer.scalar_type());
  if (p.premultiply) kernels::scale(data_of(buffer), count, p.reduction.dtype, *p.premultiply);
  algorithms::allreduce(ctx.mesh, data_of(buffer), count, p.reduction, ctx.deadline);
  if (p.average) kernels::divide(data_of(buffer), count, p.reduction.dtype, ctx.size);
  staged.commit();
}

void allgather(OpContext& ctx, const std::vector<std::vector<at::Tensor>>& output_tensors,
               const std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions&) {
  const at::Tensor& input = input_tensors[0];
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
  Staged staged(output_tensor);
  int64_t block = input_tensor.numel();
  at::Tensor blocks = staged.buffer().view({-1});
  // FSDP passes an input that is a view of its own block of the output: copy_ then is a no-op.
  block_of(blocks, block, ctx.rank).view(input_tensor.sizes()).copy_(input_tensor);
  algorithms::allgather(ctx.mesh, data_of(blocks), bytes_of(input_tensor), ctx.deadline);
  staged.commit();
}

void reduce_scatter(OpContext& ctx, const std::vector<at::Tensor>& output_tensors,
                    const std::vector<std::vector<at::Tensor>>& input_tensors,
                    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = output_tensors[0];
  int64_t block = output.numel();
  at::Tensor blocks = at::empty({block * ctx.size}, output.options());
  for (int r = 0; r < ctx.size; ++r) {
    block_of(blocks, block, r).copy_(input_tensors[0][r].reshape({-1}));
  }
  reduce_scatter_blocks(ctx, blocks, block, opts.reduceOp);
  output.copy_(block_of(blocks, block, ctx.rank).view(output.sizes()));
}

void reduce_scatter_base(OpContext& ctx, const at::Tensor& output_tensor,
                         const at::Tensor& input_tensor, const c10d::ReduceScatterOptions& opts) {
  int64_t block = output_tensor.numel();
  // A private copy: the ring uses the input's blocks as scratch, and the input must not change.
  at::Tensor blocks = at::empty({block * ctx.size}, input_tensor.options());
  blocks.view(input_tensor.sizes()).copy_(input_tensor);
  reduce_scatter_blocks(ctx, blocks, block, opts.reduceOp);
  output_tensor.copy_(block_of(blocks, block, ctx.rank).view(output_tensor.sizes()));
}

void barrier(OpContext& ctx, const c10d::BarrierOptions&) {
  algorithms::barrier(ctx.mesh, ctx.deadline);
}

}  // namespace occl::runtime
