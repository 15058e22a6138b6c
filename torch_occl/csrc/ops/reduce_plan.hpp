// How occl runs a c10d reduction on its kernels (kernels/reduce.hpp): the dtype and op as the
// kernels name them, the scaling before it (PREMUL_SUM) and the division after it (AVG), and the
// flat copies that coalesced ops, and float16 and bfloat16 when they need float32, reduce in.
#pragma once

#include "../algorithms/algorithms.hpp"

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <vector>

namespace occl::runtime {

inline void* data_of(const at::Tensor& t) { return t.data_ptr(); }
inline size_t bytes_of(const at::Tensor& t) { return t.nbytes(); }

struct ReducePlan {
  algorithms::Reduction reduction;
  std::optional<double> premultiply;
  bool average = false;
};

// Only called after the spec's reduce_op_supports_dtype check passed.
ReducePlan plan(const c10d::ReduceOp& op, at::ScalarType type);

// The parts of a reduction before and after the algorithm: PREMUL_SUM scales each rank's input,
// AVG divides the result by the world size.
void premultiply(const ReducePlan& p, const at::Tensor& data);
void average(const ReducePlan& p, const at::Tensor& data, int world_size);

// A contiguous copy of `tensors` (flattened, concatenated) in `dtype`: theirs, or the float32
// that float16 and bfloat16 reduce in when the algorithm would not round once (see
// collectives.cpp, reduction_dtype).
at::Tensor flat_copy(const std::vector<at::Tensor>& tensors, at::ScalarType dtype);
// The inverse of flat_copy: writes each slice of `flat` back into its tensor.
void copy_back(const at::Tensor& flat, const std::vector<at::Tensor>& tensors);

}  // namespace occl::runtime
