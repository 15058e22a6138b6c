// The functions the spec's checks call by name. The generated bad-input tests compute
// reduce_op_name and slice_bytes in Python, so their results are fixed.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace occl::kit {

// The enumerator's name ("SUM"), "UNKNOWN" for a value torch does not define.
const char* reduce_op_name(const c10d::ReduceOp& op);

// True when several elements of `tensor` share memory (e.g. an expand()ed view): results
// cannot be written into it.
bool has_overlapping_elements(const at::Tensor& tensor);

// Empty when `sizes` splits `tensor` along dim 0 into world_size parts (empty `sizes`: equal
// parts), else why not.
std::string split_sizes_unfit_reason(const std::vector<int64_t>& sizes, const at::Tensor& tensor,
                                     int world_size);
// The rows of dim 0 that each rank's slice has: `split_sizes`, or equal parts when empty.
std::vector<int64_t> rows_per_rank(const std::vector<int64_t>& split_sizes,
                                   const at::Tensor& tensor, int world_size);
// The bytes of one row of `tensor` (the elements after dim 0).
size_t row_bytes_of(const at::Tensor& tensor);
// The bytes of `tensor` that rank `index` sends or receives, for sizes that fit.
size_t slice_bytes(const std::vector<int64_t>& split_sizes, const at::Tensor& tensor, int index,
                   int world_size);

// Names one element of a list argument in error messages: output_tensors[1][0].
struct CheckLabel {
  CheckLabel(const char* name, size_t index) : name(name), depth(1), index{index, 0} {}
  CheckLabel(const char* name, size_t outer, size_t inner)
      : name(name), depth(2), index{outer, inner} {}
  const char* name;
  int depth;
  size_t index[2];
};

inline std::ostream& operator<<(std::ostream& out, const CheckLabel& label) {
  out << label.name;
  for (int level = 0; level < label.depth; ++level) out << '[' << label.index[level] << ']';
  return out;
}

}  // namespace occl::kit
