// generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
//
// Validation macros, one per entry of `checks:` in the spec. Each raises through TORCH_CHECK
// with a message that names the op, the argument and the rule. The generated backend calls them
// before an op is queued, so bad arguments raise at the call, on the caller's thread.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "occl_kit/check_helpers.hpp"
#include "occl_kit/signature.hpp"

namespace occl {

// The kit's functions the spec's conditions, messages and `agree:` expressions call by name.
using ::occl::kit::reduce_op_name;
using ::occl::kit::has_overlapping_elements;
using ::occl::kit::split_sizes_unfit_reason;
using ::occl::kit::slice_bytes;
using ::occl::kit::total_numel;
using ::occl::kit::bytes_per_tensor;
using ::occl::kit::bytes_per_slice;

// Devices the backend accepts (spec: backend.devices).
inline bool is_supported_device(const c10::Device& device) {
  return device.type() == c10::DeviceType::CPU ||
         (device.type() == c10::DeviceType::PrivateUse1 && c10::get_privateuse1_backend() == "occldev");
}
constexpr const char* kSupportedDevices = "cpu, occldev";

// Devices whose tensors the runtime gets as CPU copies (spec: host_addressable: false).
inline bool is_staged_device([[maybe_unused]] const c10::Device& device) {
  return false;
}

// Why reduce op `op` is not defined on `dtype`, or nullptr if it is (spec: support).
inline const char* reduce_op_unsupported_reason(const c10d::ReduceOp& op, at::ScalarType dtype) {
  switch (dtype) {
    case at::ScalarType::Float:
    case at::ScalarType::Double:
    case at::ScalarType::Half:
    case at::ScalarType::BFloat16:
    case at::ScalarType::Char:
    case at::ScalarType::Byte:
    case at::ScalarType::Short:
    case at::ScalarType::Int:
    case at::ScalarType::Long:
    case at::ScalarType::Bool:
      break;
    default:
      return "occl reduces float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool";
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return nullptr;
    case c10d::ReduceOp::AVG:
      return (dtype == at::ScalarType::Float || dtype == at::ScalarType::Double || dtype == at::ScalarType::Half || dtype == at::ScalarType::BFloat16 || dtype == at::ScalarType::Char || dtype == at::ScalarType::Byte || dtype == at::ScalarType::Short || dtype == at::ScalarType::Int || dtype == at::ScalarType::Long) ? nullptr : "AVG needs a numeric dtype";
    case c10d::ReduceOp::PRODUCT:
      return nullptr;
    case c10d::ReduceOp::MIN:
      return nullptr;
    case c10d::ReduceOp::MAX:
      return nullptr;
    case c10d::ReduceOp::BAND:
      return (dtype == at::ScalarType::Char || dtype == at::ScalarType::Byte || dtype == at::ScalarType::Short || dtype == at::ScalarType::Int || dtype == at::ScalarType::Long || dtype == at::ScalarType::Bool) ? nullptr : "bitwise ops need an integer or bool dtype";
    case c10d::ReduceOp::BOR:
      return (dtype == at::ScalarType::Char || dtype == at::ScalarType::Byte || dtype == at::ScalarType::Short || dtype == at::ScalarType::Int || dtype == at::ScalarType::Long || dtype == at::ScalarType::Bool) ? nullptr : "bitwise ops need an integer or bool dtype";
    case c10d::ReduceOp::BXOR:
      return (dtype == at::ScalarType::Char || dtype == at::ScalarType::Byte || dtype == at::ScalarType::Short || dtype == at::ScalarType::Int || dtype == at::ScalarType::Long || dtype == at::ScalarType::Bool) ? nullptr : "bitwise ops need an integer or bool dtype";
    case c10d::ReduceOp::PREMUL_SUM:
      return (dtype == at::ScalarType::Float || dtype == at::ScalarType::Double || dtype == at::ScalarType::Half || dtype == at::ScalarType::BFloat16) ? nullptr : "PREMUL_SUM needs a floating dtype";
    default:
      return "occl defines the reduce ops SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM";
  }
}

}  // namespace occl

// single_entry: The list has exactly one entry (one tensor per process).
#define OCCL_CHECK_SINGLE_ENTRY(op, label, list) \
  TORCH_CHECK(list.size() == 1, op, ": ", label, " has ", (list.size()), " entries, expected exactly 1 (one tensor per process)")

// non_empty: The list has at least one entry.
#define OCCL_CHECK_NON_EMPTY(op, label, list) \
  TORCH_CHECK(!list.empty(), op, ": ", label, " is empty, expected at least one tensor")

// no_entries: The list is empty; only the root rank of gather and scatter passes tensors there.
#define OCCL_CHECK_NO_ENTRIES(op, label, list) \
  TORCH_CHECK(list.empty(), op, ": ", label, " has ", (list.size()), " entries, expected none on a non-root rank")

// entry_per_rank: The list has one entry per rank of the group.
#define OCCL_CHECK_ENTRY_PER_RANK(op, label, list) \
  TORCH_CHECK(list.size() == static_cast<size_t>(world_size), op, ": ", label, " has ", (list.size()), " entries, expected ", (world_size), " (= world size)")

// same_length: Two lists pair up entry by entry, so they have the same length.
#define OCCL_CHECK_SAME_LENGTH(op, label, tensors, other, other_text) \
  TORCH_CHECK(tensors.size() == other.size(), op, ": ", label, " has ", (tensors.size()), " tensors, expected ", (other.size()), " (as many as ", other_text, ")")

// sparse_coo: The tensor is a sparse COO tensor (dense tensors go through allreduce).
#define OCCL_CHECK_SPARSE_COO(op, label, tensor) \
  TORCH_CHECK(tensor.layout() == c10::kSparse, op, ": ", label, " has layout ", (tensor.layout()), ", expected a sparse COO tensor")

// reduce_op_is_sum: The reduce op is SUM, the only one defined for sparse tensors.
#define OCCL_CHECK_REDUCE_OP_IS_SUM(op, label, value) \
  TORCH_CHECK(value == c10d::ReduceOp::SUM, op, ": ", label, " is ", (reduce_op_name(value)), ", expected SUM (the only reduce op for sparse tensors)")

// dense_or_sparse_coo: The tensor is strided or sparse COO (allreduce sums sparse tensors too).
#define OCCL_CHECK_DENSE_OR_SPARSE_COO(op, label, tensor) \
  TORCH_CHECK(tensor.layout() == c10::kStrided || tensor.layout() == c10::kSparse, op, ": ", label, " has layout ", (tensor.layout()), ", expected a dense (strided) or sparse COO tensor")

// dense: The tensor is strided; sparse and other layouts are rejected.
#define OCCL_CHECK_DENSE(op, label, tensor) \
  TORCH_CHECK(tensor.layout() == c10::kStrided, op, ": ", label, " has layout ", (tensor.layout()), ", expected a dense (strided) tensor")

// writable: Results can be written into the tensor, i.e. no two of its elements share memory (as in an expand()ed view).
#define OCCL_CHECK_WRITABLE(op, label, tensor) \
  TORCH_CHECK(!has_overlapping_elements(tensor), op, ": ", label, " has elements that share memory (e.g. an expand()ed view), expected a tensor results can be written into")

// equal_values: Two quantities the op pairs up are equal.
#define OCCL_CHECK_EQUAL_VALUES(op, label, value, expected, expected_text) \
  TORCH_CHECK(value == (expected), op, ": ", label, " is ", (value), ", expected ", (expected), " (= ", expected_text, ")")

// supported_device: The tensor lives on a device type listed in `backend.devices`.
#define OCCL_CHECK_SUPPORTED_DEVICE(op, label, tensor) \
  TORCH_CHECK(is_supported_device(tensor.device()), op, ": ", label, " is on device ", (tensor.device()), ", expected one of: ", (kSupportedDevices))

// same_dtype: The tensor has the dtype of a reference tensor (no mixed dtypes in one call).
#define OCCL_CHECK_SAME_DTYPE(op, label, tensor, reference, reference_text) \
  TORCH_CHECK(tensor.scalar_type() == reference.scalar_type(), op, ": ", label, " has dtype ", (tensor.scalar_type()), ", expected ", (reference.scalar_type()), " (the dtype of ", reference_text, ")")

// same_device: The tensor is on the device of a reference tensor (no mixed devices in one call).
#define OCCL_CHECK_SAME_DEVICE(op, label, tensor, reference, reference_text) \
  TORCH_CHECK(tensor.device() == reference.device(), op, ": ", label, " is on device ", (tensor.device()), ", expected ", (reference.device()), " (the device of ", reference_text, ")")

// numel_equals: The tensor has exactly the number of elements the op needs.
#define OCCL_CHECK_NUMEL_EQUALS(op, label, tensor, expected, expected_text) \
  TORCH_CHECK(tensor.numel() == (expected), op, ": ", label, " has ", (tensor.numel()), " elements, expected ", (expected), " (= ", expected_text, ")")

// list_length_is_world_size: The list holds one tensor per rank of the group.
#define OCCL_CHECK_LIST_LENGTH_IS_WORLD_SIZE(op, label, tensors) \
  TORCH_CHECK(tensors.size() == static_cast<size_t>(world_size), op, ": ", label, " has ", (tensors.size()), " tensors, expected ", (world_size), " (= world size)")

// root_rank_in_range: A root rank names a member of the group.
#define OCCL_CHECK_ROOT_RANK_IN_RANGE(op, label, value) \
  TORCH_CHECK(value >= 0 && value < world_size, op, ": ", label, " is ", (value), ", expected a rank in [0, ", (world_size), ")")

// root_tensor_is_zero: A root tensor index is 0, since every process passes exactly one tensor.
#define OCCL_CHECK_ROOT_TENSOR_IS_ZERO(op, label, value) \
  TORCH_CHECK(value == 0, op, ": ", label, " is ", (value), ", expected 0 (one tensor per process)")

// peer_rank: A point-to-point peer is another member of the group.
#define OCCL_CHECK_PEER_RANK(op, label, value) \
  TORCH_CHECK(value >= 0 && value < world_size && value != rank, op, ": ", label, " is ", (value), ", expected another rank of the group (0 <= rank < ", (world_size), ", not this rank, ", (rank), ")")

// split_sizes: Split sizes are empty (equal splits) or one per rank, and add up to the first dimension of the tensor they split.
#define OCCL_CHECK_SPLIT_SIZES(op, label, list, sliced, sliced_text) \
  TORCH_CHECK(split_sizes_unfit_reason(list, sliced, world_size).empty(), op, ": ", label, " does not fit ", sliced_text, ": ", (split_sizes_unfit_reason(list, sliced, world_size)))

// reduce_op_supports_dtype: The reduce op is defined for the tensor's dtype, by the rules of support.reduce_ops (below).
#define OCCL_CHECK_REDUCE_OP_SUPPORTS_DTYPE(op, label, tensor, reduce_op) \
  TORCH_CHECK(reduce_op_unsupported_reason(reduce_op, tensor.scalar_type()) == nullptr, op, ": ", label, " has dtype ", (tensor.scalar_type()), ", which reduce op ", (reduce_op_name(reduce_op)), " does not support: ", (reduce_op_unsupported_reason(reduce_op, tensor.scalar_type())))
