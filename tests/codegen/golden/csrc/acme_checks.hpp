// generated — do not edit. Source: fixtures/mini.yaml; regenerate with `python -m occl_codegen --spec fixtures/mini.yaml --out golden --python-out golden/python` in the folder holding fixtures/ and golden/.
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

namespace acme::c10d {

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
         device.type() == c10::DeviceType::CUDA;
}
constexpr const char* kSupportedDevices = "cpu, cuda";

// Devices whose tensors the runtime gets as CPU copies (spec: host_addressable: false).
inline bool is_staged_device([[maybe_unused]] const c10::Device& device) {
  return device.type() == c10::DeviceType::CUDA;
}

// Why reduce op `op` is not defined on `dtype`, or nullptr if it is (spec: support).
inline const char* reduce_op_unsupported_reason(const c10d::ReduceOp& op, at::ScalarType dtype) {
  switch (dtype) {
    case at::ScalarType::Float:
    case at::ScalarType::Long:
      break;
    default:
      return "acme reduces float32, int64";
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return nullptr;
    case c10d::ReduceOp::BAND:
      return (dtype == at::ScalarType::Long) ? nullptr : "bitwise ops need an integer dtype";
    default:
      return "acme defines the reduce ops SUM, BAND";
  }
}

}  // namespace acme::c10d

// single_entry: The list has exactly one entry.
#define ACME_CHECK_SINGLE_ENTRY(op, label, list) \
  TORCH_CHECK(list.size() == 1, op, ": ", label, " has ", (list.size()), " entries, expected 1")

// dense: The tensor is strided.
#define ACME_CHECK_DENSE(op, label, tensor) \
  TORCH_CHECK(tensor.layout() == c10::kStrided, op, ": ", label, " has layout ", (tensor.layout()), ", expected a strided tensor")

// same_dtype: The tensor has the dtype of a reference tensor.
#define ACME_CHECK_SAME_DTYPE(op, label, tensor, reference, reference_text) \
  TORCH_CHECK(tensor.scalar_type() == reference.scalar_type(), op, ": ", label, " has dtype ", (tensor.scalar_type()), ", expected ", (reference.scalar_type()), " (the dtype of ", reference_text, ")")

// one_per_rank: The list holds one tensor per rank.
#define ACME_CHECK_ONE_PER_RANK(op, label, tensors) \
  TORCH_CHECK(tensors.size() == static_cast<size_t>(world_size), op, ": ", label, " has ", (tensors.size()), " tensors, expected ", (world_size))

// rank_in_range: A rank names a member of the group.
#define ACME_CHECK_RANK_IN_RANGE(op, label, value) \
  TORCH_CHECK(value >= 0 && value < world_size, op, ": ", label, " is ", (value), ", expected a rank in [0, ", (world_size), ")")
