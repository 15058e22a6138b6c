// Libraries move contiguous buffers; c10d hands over tensors of any layout.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace occl::kit {

// `user` itself when contiguous, else a contiguous copy; `commit()` writes a copy back.
class Staged {
 public:
  explicit Staged(const at::Tensor& user) : user_(user), buffer_(user.contiguous()) {}
  const at::Tensor& buffer() const { return buffer_; }
  void* data() const { return buffer_.data_ptr(); }
  size_t bytes() const { return buffer_.nbytes(); }
  void commit() const {
    if (!buffer_.is_same(user_)) user_.copy_(buffer_);
  }

 private:
  at::Tensor user_;
  at::Tensor buffer_;
};

// Every tensor's elements, in order, one tensor after another, in one new contiguous tensor (a
// list-form op's tensors as one buffer).
at::Tensor joined(const std::vector<at::Tensor>& tensors);
// The reverse: consecutive pieces of contiguous `buffer` written into `outputs` (any layout),
// each as many elements as it has.
void unpack(const at::Tensor& buffer, const std::vector<at::Tensor>& outputs);

}  // namespace occl::kit
