// Every float16 and bfloat16 SUM, PRODUCT, MIN and MAX of two values through occl's kernel
// (torch_occl/csrc/kernels/reduce.cpp), against c10's conversions around the same float32
// arithmetic: the kernel promises those bits at every width it has (OCCL_FLOAT16_LANES,
// OCCL_BFLOAT16_LANES), whichever instructions the CPU lends it. Built and run by
// half_kernel_bits.py; `stride` checks every stride-th second operand against every first.
#include "kernels/reduce.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using occl::kernels::DType;
using occl::kernels::ReduceOp;

namespace {

// The scalar definitions: a NaN `a` pairs with itself in a sum or product; std::min, std::max.
float apply(ReduceOp op, float a, float b) {
  const float b_unless_a_is_nan = std::isnan(a) ? a : b;
  switch (op) {
    case ReduceOp::Sum: return a + b_unless_a_is_nan;
    case ReduceOp::Product: return a * b_unless_a_is_nan;
    case ReduceOp::Min: return std::min(a, b);
    default: return std::max(a, b);
  }
}

template <typename Half>
uint16_t expected(ReduceOp op, uint16_t a, uint16_t b) {
  const float x = static_cast<float>(Half(a, Half::from_bits()));
  const float y = static_cast<float>(Half(b, Half::from_bits()));
  return Half(apply(op, x, y)).x;
}

// Mismatches of `op` over every first operand against every stride-th second, both orders.
template <typename Half>
long check(DType dtype, ReduceOp op, unsigned stride) {
  const size_t count = 65536 + 13;  // every pattern, and a tail shorter than any vector
  std::vector<uint16_t> every(count), other(count), out(count);
  for (size_t i = 0; i < count; ++i) every[i] = static_cast<uint16_t>(i);
  long mismatches = 0;
  for (unsigned value = 0; value < 65536; value += stride) {
    std::fill(other.begin(), other.end(), static_cast<uint16_t>(value));
    for (int order = 0; order < 2; ++order) {
      const uint16_t* a = order ? other.data() : every.data();
      const uint16_t* b = order ? every.data() : other.data();
      const void* sources[2] = {a, b};
      occl::kernels::reduce(out.data(), sources, 2, count, dtype, op);
      for (size_t i = 0; i < count; ++i) {
        const uint16_t want = expected<Half>(op, a[i], b[i]);
        if (out[i] != want && ++mismatches <= 5) {
          std::printf("  %s op %d: %#06x, %#06x gave %#06x, expected %#06x\n",
                      occl::kernels::dtype_name(dtype), static_cast<int>(op), a[i], b[i],
                      out[i], want);
        }
      }
    }
  }
  return mismatches;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned stride = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 1;
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max};
  const char* names[] = {"SUM", "PRODUCT", "MIN", "MAX"};
  long total = 0;
  for (int k = 0; k < 4; ++k) {
    const long half = check<c10::Half>(DType::Float16, ops[k], stride);
    const long bfloat = check<c10::BFloat16>(DType::BFloat16, ops[k], stride);
    std::printf("%-7s float16 %ld mismatches, bfloat16 %ld\n", names[k], half, bfloat);
    total += half + bfloat;
  }
  return total == 0 ? 0 : 1;
}
