#include "occl_kit/check_helpers.hpp"

#include <ATen/MemoryOverlap.h>

namespace occl::kit {

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

bool has_overlapping_elements(const at::Tensor& tensor) {
  // Only strided tensors can alias themselves; a sparse tensor's result replaces it whole.
  return tensor.layout() == c10::kStrided &&
         at::has_internal_overlap(tensor) == at::MemOverlap::Yes;
}

std::vector<int64_t> rows_per_rank(const std::vector<int64_t>& split_sizes,
                                   const at::Tensor& tensor, int world_size) {
  if (!split_sizes.empty()) return split_sizes;
  int64_t rows = tensor.dim() == 0 ? tensor.numel() : tensor.size(0);
  return std::vector<int64_t>(world_size, rows / world_size);
}

size_t row_bytes_of(const at::Tensor& tensor) {
  if (tensor.dim() == 0 || tensor.size(0) == 0) return tensor.element_size();
  return tensor.nbytes() / static_cast<size_t>(tensor.size(0));
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

}  // namespace occl::kit
