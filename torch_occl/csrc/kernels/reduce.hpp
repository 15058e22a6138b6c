// The reduction loops: the only place occl does arithmetic on user data.
//
// Deliberately free of ATen and c10d types so that a vendor can swap this file for their own
// device kernels and so that it compiles in seconds. The runtime maps torch dtypes and
// c10d::ReduceOp onto the small enums below (see runtime/reduce_spec.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace occl::kernels {

enum class DType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int8,
  UInt8,
  Int16,
  Int32,
  Int64,
  Bool,
};

// The element-wise operations the loops implement. AVG and PREMUL_SUM are SUM plus `scale`;
// on bool, SUM/MAX are BitOr and PRODUCT/MIN are BitAnd (the runtime maps them).
enum class ReduceOp : uint8_t { Sum, Product, Min, Max, BitAnd, BitOr, BitXor };

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
bool is_floating(DType dtype);

// nullptr when `op` is defined on `dtype`, else why not (for error messages).
const char* unsupported_reason(ReduceOp op, DType dtype);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], folded in that order so every rank
// that runs it on the same inputs gets the same bits. float16/bfloat16 accumulate in float32 and
// round once; when both operands of a floating SUM/PRODUCT step are NaN, the left one survives.
// dst may alias any of srcs. n >= 1.
void reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op);

// data[i] *= factor, for floating dtypes (half types through float32).
void scale(void* data, size_t count, DType dtype, double factor);

// data[i] /= divisor, truncating toward zero for integers (AVG on integers).
void divide(void* data, size_t count, DType dtype, int64_t divisor);

}  // namespace occl::kernels
