#include "reduce.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace occl::kernels {
namespace {

// Half types compute in float32; everything else in its own type.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>,
                               float, T>;

// Integer SUM/PRODUCT wrap around like torch's own integer arithmetic instead of being undefined.
template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to unsigned int at least, so uint16*uint16 cannot overflow a signed int.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <ReduceOp Op, typename A>
inline A apply(A a, A b) {
  if constexpr (Op == ReduceOp::Sum) return wrapping_add(a, b);
  if constexpr (Op == ReduceOp::Product) return wrapping_mul(a, b);
  if constexpr (Op == ReduceOp::Min) return std::min(a, b);  // NaN handling as torch.minimum is not promised
  if constexpr (Op == ReduceOp::Max) return std::max(a, b);
  if constexpr (std::is_integral_v<A>) {
    if constexpr (Op == ReduceOp::BitAnd) return a & b;
    if constexpr (Op == ReduceOp::BitOr) return a | b;
    if constexpr (Op == ReduceOp::BitXor) return a ^ b;
  }
  return a;  // unreachable: unsupported_reason() rejects bitwise ops on floating types first
}

template <ReduceOp Op, typename T>
void reduce_typed(T* dst, const void* const* srcs, int n, size_t count) {
  using A = Acc<T>;
  const T* first = static_cast<const T*>(srcs[0]);
  if (n == 2) {  // the ring's case: keep the loop simple enough to vectorise
    const T* second = static_cast<const T*>(srcs[1]);
    for (size_t i = 0; i < count; ++i) {
      dst[i] = static_cast<T>(apply<Op>(static_cast<A>(first[i]), static_cast<A>(second[i])));
    }
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    A acc = static_cast<A>(first[i]);
    for (int s = 1; s < n; ++s) {
      acc = apply<Op>(acc, static_cast<A>(static_cast<const T*>(srcs[s])[i]));
    }
    dst[i] = static_cast<T>(acc);
  }
}

template <typename T>
void reduce_dispatch_op(void* dst, const void* const* srcs, int n, size_t count, ReduceOp op) {
  T* out = static_cast<T*>(dst);
  switch (op) {
    case ReduceOp::Sum: return reduce_typed<ReduceOp::Sum>(out, srcs, n, count);
    case ReduceOp::Product: return reduce_typed<ReduceOp::Product>(out, srcs, n, count);
    case ReduceOp::Min: return reduce_typed<ReduceOp::Min>(out, srcs, n, count);
    case ReduceOp::Max: return reduce_typed<ReduceOp::Max>(out, srcs, n, count);
    case ReduceOp::BitAnd: return reduce_typed<ReduceOp::BitAnd>(out, srcs, n, count);
    case ReduceOp::BitOr: return reduce_typed<ReduceOp::BitOr>(out, srcs, n, count);
    case ReduceOp::BitXor: return reduce_typed<ReduceOp::BitXor>(out, srcs, n, count);
  }
}

// Calls fn(T{}) with T the C++ type of `dtype`; bool is stored as one byte holding 0 or 1.
template <typename Fn>
void visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(c10::Half{});
    case DType::BFloat16: return fn(c10::BFloat16{});
    case DType::Int8: return fn(int8_t{});
    case DType::UInt8: return fn(uint8_t{});
    case DType::Int16: return fn(int16_t{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Bool: return fn(uint8_t{});
  }
}

}  // namespace

size_t element_size(DType dtype) {
  size_t size = 0;
  visit_dtype(dtype, [&](auto zero) { size = sizeof(zero); });
  return size;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 ||
         dtype == DType::BFloat16;
}

const char* unsupported_reason(ReduceOp op, DType dtype) {
  bool bitwise = op == ReduceOp::BitAnd || op == ReduceOp::BitOr || op == ReduceOp::BitXor;
  if (bitwise && is_floating(dtype)) return "bitwise ops need an integer or bool dtype";
  return nullptr;
}

void reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op) {
  if (const char* reason = unsupported_reason(op, dtype)) throw std::invalid_argument(reason);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    reduce_dispatch_op<T>(dst, srcs, n, count, op);
  });
}

void scale(void* data, size_t count, DType dtype, double factor) {
  if (!is_floating(dtype)) throw std::invalid_argument("scaling needs a floating dtype");
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_integral_v<T>) {
      using A = Acc<T>;
      T* values = static_cast<T*>(data);
      const A f = static_cast<A>(factor);
      for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(static_cast<A>(values[i]) * f);
    }
  });
}

void divide(void* data, size_t count, DType dtype, int64_t divisor) {
  if (dtype == DType::Bool) throw std::invalid_argument("division needs a numeric dtype");
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    using A = Acc<T>;
    T* values = static_cast<T*>(data);
    // A true division, not a multiplication by 1/divisor, which can be off by one ulp.
    const A d = static_cast<A>(divisor);
    for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(static_cast<A>(values[i]) / d);
  });
}

}  // namespace occl::kernels
