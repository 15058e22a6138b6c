#include "reduce.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OCCL_HAS_F16C_PATH 1
#endif

// Run-time ISA dispatch that keeps the build portable: GCC compiles each OCCL_VECTOR_CLONES
// function once per listed ISA level and the loader picks the best one for the CPU (an ifunc).
// It goes on the innermost loops only, which keeps the number of compiled loops (and the build
// time) down; `flatten` inlines the arithmetic and c10 conversions they call into each clone,
// because only code compiled inside a clone gets the wider vectors. arch=x86-64-v4 is GCC 11+.
// The optimize flags keep every clone's bits equal to the baseline x86-64 code's:
// - fp-contract=off: g++ fuses a*b+c into an FMA by default when the ISA has one, which rounds
//   once instead of twice; the baseline clone has no FMA, so results would depend on the CPU.
// - no-tree-sink: stops GCC from moving the float arithmetic of c10's branch-free float16
//   conversions into branches, where if-conversion may not bring it back (it may trap) and the
//   loop would stay scalar on AVX2. It changes where values are computed, never what they are.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define OCCL_VECTOR_CLONES                                                            \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten, \
                 optimize("fp-contract=off", "no-tree-sink")))
#else
#define OCCL_VECTOR_CLONES
#endif

namespace occl::kernels {
namespace {

// Half types compute in float32; everything else in its own type.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>,
                               float, T>;

// x86 gives a NaN result the payload and sign of its first NaN operand, but + and * commute, so
// which operand a vector instruction sees first is the compiler's choice. Combining a NaN `a`
// with itself yields quiet(a) in either order: what the scalar loop (a op b) gave, and the same
// bits in every clone, so on ranks whose CPUs pick different clones.
template <typename A>
A b_unless_a_is_nan(A a, A b) {
  return std::isnan(a) ? a : b;
}

// Integer SUM/PRODUCT wrap around like torch's own integer arithmetic instead of being undefined.
template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b_unless_a_is_nan(a, b);
  }
}

template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to unsigned int at least, so uint16*uint16 cannot overflow a signed int.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b_unless_a_is_nan(a, b);
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

// out[i] = a[i] op b[i], computed in the accumulation type A. Each operand is either user data
// (T) or an accumulator block (A), so this one loop is every step of reduce_typed. It has no
// branches or calls left after inlining, which is what lets GCC vectorise it, half-type
// conversions included (c10's portable conversions are branch-free bit arithmetic).
template <ReduceOp Op, typename A, typename Out, typename In1, typename In2>
OCCL_VECTOR_CLONES void combine(Out* out, const In1* a, const In2* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<Out>(apply<Op>(static_cast<A>(a[i]), static_cast<A>(b[i])));
  }
}

// out[i] = fn(in[i]), computed in the accumulation type of T.
template <typename T, typename Fn>
OCCL_VECTOR_CLONES void transform(T* out, const T* in, size_t count, Fn fn) {
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(fn(static_cast<Acc<T>>(in[i])));
}

// Elements per accumulator block in the n > 2 fold: 2 KiB of float32, small enough to stay in L1
// while every source streams through it.
constexpr size_t kBlockElements = 512;

#ifdef OCCL_HAS_F16C_PATH
// float16 <-> float32 with the F16C instructions, eight at a time. The build targets any x86-64,
// so c10's conversions compile to their portable bit arithmetic, which runs float16 reductions
// at a third of float32's rate. The results are the same bits: both convert exactly one way and
// round to nearest even the other, and NaNs leave as c10's portable conversion writes them.
#define OCCL_F16C __attribute__((target("avx2,f16c")))

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// A NaN as c10's portable conversion writes it: the quiet NaN 0x7E00 with the value's sign.
inline uint16_t canonical_nan(float value) {
  return static_cast<uint16_t>((std::signbit(value) ? 0x8000 : 0) | 0x7E00);
}

OCCL_F16C inline __m256 widen8(const c10::Half* in) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}

OCCL_F16C inline void narrow8(c10::Half* out, __m256 values) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT));
  if (_mm256_movemask_ps(_mm256_cmp_ps(values, values, _CMP_UNORD_Q)) != 0) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, values);
    for (int j = 0; j < 8; ++j) {
      if (std::isnan(lanes[j])) out[j].x = canonical_nan(lanes[j]);
    }
  }
}

// apply<Op> on eight lanes; written as a loop that the compiler turns into vector instructions.
template <ReduceOp Op>
OCCL_F16C inline __m256 apply8(__m256 a, __m256 b) {
  alignas(32) float x[8], y[8];
  _mm256_store_ps(x, a);
  _mm256_store_ps(y, b);
  for (int j = 0; j < 8; ++j) x[j] = apply<Op>(x[j], y[j]);
  return _mm256_load_ps(x);
}

// reduce_typed's fold for float16 on such CPUs: every source's elements widened to float32,
// combined in rank order, rounded once. dst[i] is written after every source's [i] was read, so
// dst may alias a source.
template <ReduceOp Op>
OCCL_F16C void reduce_half_f16c(c10::Half* dst, const void* const* srcs, int n, size_t count) {
  auto src = [srcs](int s) { return static_cast<const c10::Half*>(srcs[s]); };
  // Four vectors per pass: one alone leaves the loop bound by its own bookkeeping.
  constexpr size_t kPass = 32;
  size_t i = 0;
  for (; i + kPass <= count; i += kPass) {
    __m256 acc[kPass / 8];
    for (size_t k = 0; k < kPass / 8; ++k) acc[k] = widen8(src(0) + i + 8 * k);
    for (int s = 1; s < n; ++s) {
      for (size_t k = 0; k < kPass / 8; ++k) {
        acc[k] = apply8<Op>(acc[k], widen8(src(s) + i + 8 * k));
      }
    }
    for (size_t k = 0; k < kPass / 8; ++k) narrow8(dst + i + 8 * k, acc[k]);
  }
  for (; i + 8 <= count; i += 8) {
    __m256 acc = widen8(src(0) + i);
    for (int s = 1; s < n; ++s) acc = apply8<Op>(acc, widen8(src(s) + i));
    narrow8(dst + i, acc);
  }
  for (; i < count; ++i) {
    float acc = _cvtsh_ss(src(0)[i].x);
    for (int s = 1; s < n; ++s) acc = apply<Op>(acc, _cvtsh_ss(src(s)[i].x));
    dst[i].x = std::isnan(acc) ? canonical_nan(acc) : _cvtss_sh(acc, _MM_FROUND_TO_NEAREST_INT);
  }
}
#endif

template <ReduceOp Op, typename T>
void reduce_typed(T* dst, const void* const* srcs, int n, size_t count) {
  using A = Acc<T>;
#ifdef OCCL_HAS_F16C_PATH
  if constexpr (std::is_same_v<T, c10::Half>) {
    if (cpu_has_f16c()) return reduce_half_f16c<Op>(dst, srcs, n, count);
  }
#endif
  auto src = [srcs](int s) { return static_cast<const T*>(srcs[s]); };
  if (n == 1) {  // still a round trip through A, as for n > 1 (it canonicalises half-type NaNs)
    transform(dst, src(0), count, [](A v) { return v; });
    return;
  }
  if (n == 2) {  // the ring's case
    combine<Op, A>(dst, src(0), src(1), count);
    return;
  }
  // Fold source by source over a block rather than element by element, so that each step is a
  // two-input loop that vectorises; every element still sees srcs[0], srcs[1], ... in order.
  // dst is written only by the last step, after every source's block has been read, so dst
  // may alias any source.
  A acc[kBlockElements];
  for (size_t begin = 0; begin < count; begin += kBlockElements) {
    const size_t len = std::min(kBlockElements, count - begin);
    combine<Op, A>(acc, src(0) + begin, src(1) + begin, len);
    for (int s = 2; s < n - 1; ++s) combine<Op, A>(acc, acc, src(s) + begin, len);
    combine<Op, A>(dst + begin, acc, src(n - 1) + begin, len);
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
    default: break;
  }
  // reduce() has rejected bitwise ops on floating types, so only integers get loops for them.
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::BitAnd: return reduce_typed<ReduceOp::BitAnd>(out, srcs, n, count);
      case ReduceOp::BitOr: return reduce_typed<ReduceOp::BitOr>(out, srcs, n, count);
      case ReduceOp::BitXor: return reduce_typed<ReduceOp::BitXor>(out, srcs, n, count);
      default: break;
    }
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
      const Acc<T> f = static_cast<Acc<T>>(factor);
      T* values = static_cast<T*>(data);
      transform(values, values, count, [f](Acc<T> v) { return apply<ReduceOp::Product>(v, f); });
    }
  });
}

// Only the floating dtypes vectorise here: x86 has no SIMD integer division.
void divide(void* data, size_t count, DType dtype, int64_t divisor) {
  if (dtype == DType::Bool) throw std::invalid_argument("division needs a numeric dtype");
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    // A true division, not a multiplication by 1/divisor, which can be off by one ulp.
    const Acc<T> d = static_cast<Acc<T>>(divisor);
    T* values = static_cast<T*>(data);
    transform(values, values, count, [d](Acc<T> v) { return v / d; });
  });
}

}  // namespace occl::kernels
