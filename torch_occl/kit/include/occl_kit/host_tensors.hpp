// The runtime works on host memory. An op's tensors reach it as they are when on the CPU, as CPU
// views of a host-addressable device's memory (no copy), and as CPU copies of a device's whose
// memory the host cannot address (staged: the spec's host_addressable: false); the copies of
// what the op writes go back to the device when the op succeeds, before its Work completes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>
#include <vector>

namespace occl::kit {

// Whether a device's tensors reach the runtime as copies (the generated is_staged_device).
using DeviceTest = bool (*)(const c10::Device&);

// The copies back to device tensors that an op's results take, in order.
class CopyBack {
 public:
  void add(at::Tensor device, at::Tensor host) {
    copies_.emplace_back(std::move(device), std::move(host));
  }
  void run() const;

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;  // (device tensor, its host copy)
};

// One op's tensors on the host. `label` names the op in errors ("occl.allreduce").
class HostTensors {
 public:
  HostTensors(const char* label, DeviceTest staged) : label_(label), staged_(staged) {}

  // What the op only reads.
  template <typename Tensors>
  Tensors read(const Tensors& tensors) { return on_host(tensors, false); }
  // What the op writes (and may read first, as in-place ops do).
  template <typename Tensors>
  Tensors written(const Tensors& tensors) { return on_host(tensors, true); }

  // The copies back the op's written staged tensors need; call once, after the above.
  CopyBack copy_back() { return std::move(copy_back_); }

 private:
  at::Tensor on_host(const at::Tensor& tensor, bool written);
  std::vector<at::Tensor> on_host(const std::vector<at::Tensor>& tensors, bool written);
  std::vector<std::vector<at::Tensor>> on_host(const std::vector<std::vector<at::Tensor>>& lists,
                                               bool written);

  const char* label_;
  DeviceTest staged_;
  CopyBack copy_back_;
};

}  // namespace occl::kit
