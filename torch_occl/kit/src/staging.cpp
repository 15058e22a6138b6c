#include "occl_kit/staging.hpp"

#include <ATen/ops/cat.h>

namespace occl::kit {

at::Tensor joined(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& tensor : tensors) flat.push_back(tensor.reshape(-1));
  return at::cat(flat);
}

void unpack(const at::Tensor& buffer, const std::vector<at::Tensor>& outputs) {
  int64_t offset = 0;
  for (const auto& output : outputs) {
    output.copy_(buffer.reshape(-1).narrow(0, offset, output.numel()).view(output.sizes()));
    offset += output.numel();
  }
}

}  // namespace occl::kit
