#include "occl_kit/reduce.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

namespace occl::kit {

double premul_factor(const c10d::ReduceOp& op) {
  auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "PREMUL_SUM arrived without its factor");
  if (supplement->tensor_factor.defined()) return supplement->tensor_factor.item<double>();
  return supplement->double_factor;
}

ReduceSteps reduce_steps(const c10d::ReduceOp& op, at::ScalarType dtype) {
  const bool is_bool = dtype == at::kBool;
  ReduceSteps steps;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: steps.base = is_bool ? c10d::ReduceOp::BOR : c10d::ReduceOp::SUM; break;
    case c10d::ReduceOp::AVG: steps.average = true; break;
    case c10d::ReduceOp::PREMUL_SUM: steps.premultiply = premul_factor(op); break;
    case c10d::ReduceOp::PRODUCT: steps.base = is_bool ? c10d::ReduceOp::BAND : c10d::ReduceOp::PRODUCT; break;
    case c10d::ReduceOp::MIN: steps.base = is_bool ? c10d::ReduceOp::BAND : c10d::ReduceOp::MIN; break;
    case c10d::ReduceOp::MAX: steps.base = is_bool ? c10d::ReduceOp::BOR : c10d::ReduceOp::MAX; break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR: steps.base = op.op_; break;
    default: TORCH_CHECK(false, "unknown reduce op ", static_cast<int>(op.op_));
  }
  return steps;
}

at::ScalarType accumulation_dtype(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
}

Reduction::Reduction(const c10d::ReduceOp& op, const at::Tensor& input, int64_t result_numel)
    : steps(reduce_steps(op, input.scalar_type())),
      buffer(input.to(accumulation_dtype(input.scalar_type())).contiguous()) {
  if (steps.premultiply) buffer = buffer.mul(*steps.premultiply);
  result = result_numel < 0 ? buffer : at::empty({result_numel}, buffer.options());
}

void Reduction::finish(const at::Tensor& output, int world_size) const {
  at::Tensor reduced = result;
  if (steps.average) {
    reduced = reduced.is_floating_point() ? reduced.div(world_size)
                                          : reduced.div(world_size, "trunc");
  }
  if (!reduced.is_same(output)) output.copy_(reduced.view(output.sizes()));
}

}  // namespace occl::kit
