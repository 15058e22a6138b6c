#include "reduce_plan.hpp"

#include "../kernels/reduce.hpp"
#include "occl_kit/reduce.hpp"

#include <ATen/ops/empty.h>

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

kernels::ReduceOp kernel_op(c10d::ReduceOp::RedOpType base) {
  switch (base) {
    case c10d::ReduceOp::PRODUCT: return kernels::ReduceOp::Product;
    case c10d::ReduceOp::MIN: return kernels::ReduceOp::Min;
    case c10d::ReduceOp::MAX: return kernels::ReduceOp::Max;
    case c10d::ReduceOp::BAND: return kernels::ReduceOp::BitAnd;
    case c10d::ReduceOp::BOR: return kernels::ReduceOp::BitOr;
    case c10d::ReduceOp::BXOR: return kernels::ReduceOp::BitXor;
    default: return kernels::ReduceOp::Sum;  // kit::reduce_steps names no other base op
  }
}

}  // namespace

ReducePlan plan(const c10d::ReduceOp& op, at::ScalarType type) {
  kit::ReduceSteps steps = kit::reduce_steps(op, type);
  return {{*kernel_dtype(type), kernel_op(steps.base)}, steps.premultiply, steps.average};
}

void premultiply(const ReducePlan& p, const at::Tensor& data) {
  if (p.premultiply) {
    kernels::scale(data_of(data), data.numel(), p.reduction.dtype, *p.premultiply);
  }
}

void average(const ReducePlan& p, const at::Tensor& data, int world_size) {
  if (p.average) kernels::divide(data_of(data), data.numel(), p.reduction.dtype, world_size);
}

at::Tensor flat_copy(const std::vector<at::Tensor>& tensors, at::ScalarType dtype) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  at::Tensor flat = at::empty({total}, tensors[0].options().dtype(dtype));
  int64_t offset = 0;
  for (const auto& t : tensors) {
    flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

void copy_back(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace occl::runtime
