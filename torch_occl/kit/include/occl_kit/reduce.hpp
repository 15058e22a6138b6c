// c10d's reduce ops on a library that has only the basic ones (as MPI, and occl's kernels, do).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>

namespace occl::kit {

// How a c10d reduce op runs: an optional scaling of each rank's input (PREMUL_SUM), a basic op,
// and an optional division of the result by the world size (AVG).
struct ReduceSteps {
  // SUM, PRODUCT, MIN, MAX, BAND, BOR or BXOR. For bool tensors SUM and MAX are BOR, PRODUCT and
  // MIN are BAND, as torch defines them.
  c10d::ReduceOp::RedOpType base = c10d::ReduceOp::SUM;
  std::optional<double> premultiply;
  bool average = false;
};

// Throws (TORCH_CHECK) for an op torch does not define or a PREMUL_SUM without its factor; call it
// after the spec's reduce_op_supports_dtype check passed.
ReduceSteps reduce_steps(const c10d::ReduceOp& op, at::ScalarType dtype);

// PREMUL_SUM's factor, from a tensor or a number.
double premul_factor(const c10d::ReduceOp& op);

// The dtype a reduction should add in: float32 for float16 and bfloat16, so that a whole
// collective rounds once at the end, whatever the algorithm; the dtype itself otherwise.
at::ScalarType accumulation_dtype(at::ScalarType dtype);

// A reduction as a library with only the basic ops runs it: reduce `buffer` into `result` with
// `steps.base` (in the library's type for their dtype), then finish() into the op's output.
struct Reduction {
  // `buffer`: `input` contiguous, in its accumulation_dtype, premultiplied for PREMUL_SUM; the
  // input tensor itself where none of that changes it. `result`: `buffer` itself for an
  // in-place reduction (result_numel < 0), else a new tensor of result_numel elements.
  Reduction(const c10d::ReduceOp& op, const at::Tensor& input, int64_t result_numel = -1);
  // Divides `result` for AVG (on integers with truncation toward zero) and writes it into
  // `output` in output's dtype (rounding once, for half types) and layout.
  void finish(const at::Tensor& output, int world_size) const;

  ReduceSteps steps;
  at::Tensor buffer;
  at::Tensor result;
};

}  // namespace occl::kit
