// occldev's aten kernels. Those that only shape tensors (empty, views, set_) are torch's own on
// occldev's allocator; those that touch bytes (copies, fill_, zero_, item) run torch's CPU kernels
// on a host view of the device memory (host_view translates the address). Every other operator
// falls back to the CPU: its occldev arguments are copied to CPU tensors, torch's CPU kernel runs,
// and results and mutated arguments are copied back, through the copies here.
#include "device.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/zero_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

namespace occl_device {
namespace {

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "occldev tensors are strided only, not ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "pin_memory is for CPU tensors, not occldev ones");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  // The allocator allocates on the current device.
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_generic(size, device_allocator(), kKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kKeys,
                                           c10::dtype_or_default(dtype));
}

// A CPU tensor over the bytes of occldev tensor `t`, for torch's CPU kernels.
at::Tensor host_view(const at::Tensor& t) {
  at::Tensor view = at::from_blob(to_host(t.const_data_ptr()), t.sizes(), t.strides(),
                                  t.options().device(at::kCPU));
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

at::Tensor as_cpu(const at::Tensor& t) {
  TORCH_CHECK(t.is_cpu() || t.is_privateuseone(),
              "occldev copies between CPU and occldev tensors, not to or from ", t.device());
  return t.is_cpu() ? t : host_view(t);
}

// torch's copy_ leaves copies with a device it does not know to this kernel: CPU to occldev,
// occldev to CPU, occldev to occldev. Kernels are synchronous, so non_blocking changes nothing.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  if (dst.numel() > 0) {
    at::Tensor dst_on_cpu = as_cpu(dst);
    at::native::copy_(dst_on_cpu, as_cpu(self));
  }
  return dst;
}

// torch's CPU resize_ would copy the old bytes to the grown storage through device addresses, so
// the storage grows here first; torch's resize_ then only sets sizes and strides.
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  if (c10::multiply_integers(size) > 0) {
    const std::size_t needed = at::detail::computeStorageNbytesContiguous(
        size, self.dtype().itemsize(), static_cast<std::size_t>(self.storage_offset()));
    if (needed > self.storage().nbytes()) {
      resize_storage(*self.storage().unsafeGetStorageImpl(), needed);
    }
  }
  return at::native::resize_(self, size, memory_format);
}

// How the CPU fallback writes a CPU result into an occldev argument (an out= tensor).
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() > 0) {
    at::Tensor view = host_view(self);
    at::native::fill_(view, value);
  }
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  if (self.numel() > 0) {
    at::Tensor view = host_view(self);
    at::native::zero_(view);
  }
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(host_view(self));
}

// Memory is freed when its last tensor goes, and all work has finished by then: no stream needs
// to hold on to it.
void record_stream(at::Tensor& /*self*/, c10::Stream /*stream*/) {}

// A view operator cannot run on the CPU, its result must share the occldev tensor's memory:
// error_on_views makes one without a kernel here fail by name instead of returning a copy.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

} // namespace
} // namespace occl_device

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace occl_device;
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_cpu_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("fill_.Scalar", TORCH_FN(fill_));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("record_stream", TORCH_FN(record_stream));
  // torch's composite mse_loss calls mse_loss.out with a 0-dim result, which the CPU out= kernel
  // resizes to the inputs' shape first (a deprecation warning each time): the CPU's own mse_loss
  // does not.
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&occl_device::cpu_fallback>());
}

// copy_from copies a conjugated or negated view as such (host_view keeps the bits): without these,
// the Conjugate/Negative fallbacks would materialize it with clone(), whose copy comes back here.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&occl_device::cpu_fallback>());
}
