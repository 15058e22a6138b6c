#include "occl_kit/host_tensors.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

namespace occl::kit {

void CopyBack::run() const {
  for (const auto& [device, host] : copies_) device.copy_(host);
}

at::Tensor HostTensors::on_host(const at::Tensor& tensor, bool written) {
  if (!tensor.defined() || tensor.is_cpu()) return tensor;
  TORCH_CHECK(!tensor.is_sparse(), label_, ": sparse tensors are supported on cpu only, got one on ",
              tensor.device());
  const auto host_options = tensor.options().device(at::kCPU);
  if (staged_(tensor.device())) {
    at::Tensor copy = tensor.to(host_options, /*non_blocking=*/false, /*copy=*/true);
    if (written) copy_back_.add(tensor, copy);
    return copy;
  }
  if (tensor.numel() == 0) return at::empty(tensor.sizes(), host_options);
  // A view of the device tensor's memory that keeps the tensor (so its memory) alive.
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(),
                       [owner = tensor](void*) {}, host_options);
}

std::vector<at::Tensor> HostTensors::on_host(const std::vector<at::Tensor>& tensors,
                                             bool written) {
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& tensor : tensors) host.push_back(on_host(tensor, written));
  return host;
}

std::vector<std::vector<at::Tensor>> HostTensors::on_host(
    const std::vector<std::vector<at::Tensor>>& lists, bool written) {
  std::vector<std::vector<at::Tensor>> host;
  host.reserve(lists.size());
  for (const auto& list : lists) host.push_back(on_host(list, written));
  return host;
}

}  // namespace occl::kit
