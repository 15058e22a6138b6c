#include "reduce.hpp"

#include "../tuning.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OCCL_HAS_FLOAT16_INSTRUCTIONS 1
#endif

// Run-time ISA dispatch that keeps the build portable: GCC compiles each OCCL_VECTOR_CLONES
// function once per listed ISA level and the loader picks the best one for the CPU (an ifunc).
// It goes on the innermost loops only, which keeps the number of compiled loops (and the build
// time) down; `flatten` inlines the arithmetic and c10 conversions they call into each clone,
// because only code compiled inside a clone gets the wider vectors. arch=x86-64-v3 is GCC 11+.
// Each loop is compiled once more for AVX-512 (OCCL_WIDE_LOOPS), which runs only where a fold
// is large (use_wide_loops): with its 512-bit arithmetic a 4 KiB all_reduce took about 0.9 us
// longer per call, most likely the core slowing its clock for what follows, while without it
// reduce_scatter_tensor from 1 MiB on lost up to a few percent (docs/PERFORMANCE.md).
// The optimize flags keep every variant's bits equal to the baseline x86-64 code's:
// - fp-contract=off: g++ fuses a*b+c into an FMA by default when the ISA has one, which rounds
//   once instead of twice; the baseline clone has no FMA, so results would depend on the CPU.
// - no-tree-sink: stops GCC from moving the float arithmetic of c10's branch-free float16
//   conversions into branches, where if-conversion may not bring it back (it may trap) and the
//   loop would stay scalar on AVX2. It changes where values are computed, never what they are.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define OCCL_LOOP_FLAGS flatten, optimize("fp-contract=off", "no-tree-sink")
#define OCCL_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v3", "default"), OCCL_LOOP_FLAGS))
#define OCCL_WIDE_LOOPS __attribute__((target("arch=x86-64-v4"), OCCL_LOOP_FLAGS))
#define OCCL_HAS_WIDE_LOOPS 1
#else
#define OCCL_VECTOR_CLONES
#define OCCL_WIDE_LOOPS
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

// Whether a loop over `bytes` runs in AVX-512's 512-bit vectors (see OCCL_VECTOR_CLONES): the
// CPU has them and the loop is at least OCCL_WIDE_LOOPS_MIN_BYTES long.
bool use_wide_loops(size_t bytes) {
#ifdef OCCL_HAS_WIDE_LOOPS
  static const bool cpu_has_them =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl");
  return cpu_has_them && bytes >= Tuning::get().wide_loops_min_bytes;
#else
  return false;
#endif
}

// The width a fold runs in, chosen once per fold: Wide is OCCL_WIDE_LOOPS.
enum class Width { Narrow, Wide };

// Calls fn(std::integral_constant<Width, W>{}) with the width for a loop over `bytes`.
template <typename Fn>
void with_width(size_t bytes, Fn&& fn) {
  if (use_wide_loops(bytes)) return fn(std::integral_constant<Width, Width::Wide>{});
  fn(std::integral_constant<Width, Width::Narrow>{});
}

// out[i] = a[i] op b[i], computed in the accumulation type A. Each operand is either user data
// (T) or an accumulator block (A), so this one loop is every step of a fold. It has no
// branches or calls left after inlining, which is what lets GCC vectorise it, half-type
// conversions included (c10's portable conversions are branch-free bit arithmetic). It is
// compiled inside combine_narrow's clones and combine_wide (flatten), each with its vectors.
template <ReduceOp Op, typename A, typename Out, typename In1, typename In2>
inline void combine_loop(Out* out, const In1* a, const In2* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<Out>(apply<Op>(static_cast<A>(a[i]), static_cast<A>(b[i])));
  }
}

template <ReduceOp Op, typename A, typename Out, typename In1, typename In2>
OCCL_VECTOR_CLONES void combine_narrow(Out* out, const In1* a, const In2* b, size_t count) {
  combine_loop<Op, A>(out, a, b, count);
}

template <ReduceOp Op, typename A, typename Out, typename In1, typename In2>
OCCL_WIDE_LOOPS void combine_wide(Out* out, const In1* a, const In2* b, size_t count) {
  combine_loop<Op, A>(out, a, b, count);
}

template <Width W, ReduceOp Op, typename A, typename Out, typename In1, typename In2>
void combine(Out* out, const In1* a, const In2* b, size_t count) {
  if constexpr (W == Width::Wide) return combine_wide<Op, A>(out, a, b, count);
  combine_narrow<Op, A>(out, a, b, count);
}

// out[i] = fn(in[i]), computed in the accumulation type of T.
template <typename T, typename Fn>
inline void transform_loop(T* out, const T* in, size_t count, Fn fn) {
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(fn(static_cast<Acc<T>>(in[i])));
}

template <typename T, typename Fn>
OCCL_VECTOR_CLONES void transform_narrow(T* out, const T* in, size_t count, Fn fn) {
  transform_loop(out, in, count, fn);
}

template <typename T, typename Fn>
OCCL_WIDE_LOOPS void transform_wide(T* out, const T* in, size_t count, Fn fn) {
  transform_loop(out, in, count, fn);
}

template <typename T, typename Fn>
void transform(T* out, const T* in, size_t count, Fn fn) {
  with_width(count * sizeof(T), [&](auto width) {
    if constexpr (decltype(width)::value == Width::Wide) return transform_wide(out, in, count, fn);
    transform_narrow(out, in, count, fn);
  });
}

// Elements per accumulator block in the n > 2 fold: 2 KiB of float32, small enough to stay in L1
// while every source streams through it.
constexpr size_t kBlockElements = 512;

#ifdef OCCL_HAS_FLOAT16_INSTRUCTIONS
// How far ahead of their loads the half-type kernels prefetch their sources. The hardware
// prefetchers keep up with float32's loop, not with these: they do more work per cache line, so
// fewer lines are in flight. In place over a source streaming from memory (the single-copy
// pattern), 1 KiB ahead took float16 from 0.80-0.85 to 1.01-1.02 of float32's rate on this
// project's test machine, and bfloat16's two-source fold (below) from 0.73-0.81 to 0.87-0.90;
// float32's loop gained nothing from it.
constexpr size_t kPrefetchBytes = 1024;

// A prefetch never faults, so the address may lie past the buffer; it is computed as an integer,
// since a pointer past an array's end is undefined.
inline void prefetch_ahead_of(const void* at) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(at) + kPrefetchBytes));
}

// float16 <-> float32 with the CPU's conversion instructions: AVX-512's sixteen lanes, or
// F16C's eight on AVX2 CPUs. The build targets any x86-64, so c10's conversions compile to their
// portable bit arithmetic, which ran float16 reductions at a third of float32's rate. The
// results are the same bits: both convert exactly one way and round to nearest even the other,
// and NaNs leave as c10's portable conversions write them. bfloat16 likewise with AVX512-BF16's
// rounding instruction (Avx512BFloat16x32 below), and two float16 sources' sums and products
// with AVX512-FP16's arithmetic (combine_half_natively).
#define OCCL_F16C __attribute__((target("avx2,f16c"), flatten))
#define OCCL_AVX512 __attribute__((target("avx512f"), flatten))
#define OCCL_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"), flatten))
#define OCCL_AVX512_FP16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512fp16"), flatten))

// Whether to convert with those: the CPU has them, and OCCL_FLOAT16_LANES or
// OCCL_BFLOAT16_LANES allows as many lanes.
bool use_avx512() {
  static const bool use =
      Tuning::get().float16_lanes >= 16 && __builtin_cpu_supports("avx512f");
  return use;
}

bool use_f16c() {
  static const bool use = Tuning::get().float16_lanes >= 8 && __builtin_cpu_supports("avx2") &&
                          __builtin_cpu_supports("f16c");
  return use;
}

// What the 32-lane kernels use besides their own instructions: word and doubleword masks,
// vfpclassps.
bool has_avx512_bw_dq() {
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

bool use_avx512_fp16() {
  static const bool use = Tuning::get().float16_lanes >= 32 && has_avx512_bw_dq() &&
                          __builtin_cpu_supports("avx512fp16");
  return use;
}

bool use_avx512_bf16() {
  static const bool use = Tuning::get().bfloat16_lanes >= 32 && has_avx512_bw_dq() &&
                          __builtin_cpu_supports("avx512bf16");
  return use;
}

// Writes every NaN among `lanes` floats as c10's portable conversion writes it, the quiet NaN
// 0x7E00 with the value's sign: the instructions keep a NaN's payload. NaNs are rare, so this
// runs only when a lane is one.
void write_canonical_nans(c10::Half* out, const float* values, size_t lanes) {
  for (size_t j = 0; j < lanes; ++j) {
    if (std::isnan(values[j])) {
      out[j].x = static_cast<uint16_t>((std::signbit(values[j]) ? 0x8000 : 0) | 0x7E00);
    }
  }
}

// apply<Op> on sixteen floats at once, with the scalar definitions' NaN rules: a NaN `a` is
// paired with itself in a sum or product, so the result keeps its payload whichever operand
// order the compiler picks; MIN and MAX are std::min and std::max.
template <ReduceOp Op>
OCCL_AVX512 __m512 apply_to_vector(__m512 a, __m512 b) {
  if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Product) {
    const __m512 b_unless_a_is_nan =
        _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
    if constexpr (Op == ReduceOp::Sum) return _mm512_add_ps(a, b_unless_a_is_nan);
    return _mm512_mul_ps(a, b_unless_a_is_nan);
  } else if constexpr (Op == ReduceOp::Min) {  // (b < a) ? b : a
    return _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(b, a, _CMP_LT_OQ), b);
  } else {  // (a < b) ? b : a
    return _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), b);
  }
}

// The conversions of kLanes float16 elements at a time to and from a vector of floats (Vec), and
// apply<Op> on such vectors, as a loop the compiler turns into vector instructions.
struct F16cHalf8 {
  using Element = c10::Half;
  using Vec = __m256;
  static constexpr size_t kLanes = 8;
  OCCL_F16C static Vec widen(const c10::Half* in) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  }
  OCCL_F16C static void narrow(c10::Half* out, Vec values) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT));
    if (_mm256_movemask_ps(_mm256_cmp_ps(values, values, _CMP_UNORD_Q)) != 0) {
      alignas(32) float lanes[kLanes];
      _mm256_store_ps(lanes, values);
      write_canonical_nans(out, lanes, kLanes);
    }
  }
  template <ReduceOp Op>
  OCCL_F16C static Vec apply(Vec a, Vec b) {
    alignas(32) float x[kLanes], y[kLanes];
    _mm256_store_ps(x, a);
    _mm256_store_ps(y, b);
    for (size_t j = 0; j < kLanes; ++j) x[j] = occl::kernels::apply<Op>(x[j], y[j]);
    return _mm256_load_ps(x);
  }
};

// The conversions in their zero-masked forms, all lanes set: GCC 12 warns that the plain forms'
// "undefined" operand may be used uninitialized.
struct Avx512Half16 {
  using Element = c10::Half;
  using Vec = __m512;
  static constexpr size_t kLanes = 16;
  OCCL_AVX512 static Vec widen(const c10::Half* in) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  }
  OCCL_AVX512 static void narrow(c10::Half* out, Vec values) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm512_maskz_cvtps_ph(0xFFFF, values, _MM_FROUND_TO_NEAREST_INT));
    if (_mm512_cmp_ps_mask(values, values, _CMP_UNORD_Q) != 0) {
      alignas(64) float lanes[kLanes];
      _mm512_store_ps(lanes, values);
      write_canonical_nans(out, lanes, kLanes);
    }
  }
  template <ReduceOp Op>
  OCCL_AVX512 static Vec apply(Vec a, Vec b) {
    return apply_to_vector<Op>(a, b);
  }
};

// bfloat16 <-> float32 with AVX512-BF16, 32 elements a vector pair. Widening is in place: a
// shift makes floats of the even elements, a mask of the odd ones, so no shuffle is needed
// until one permute puts the rounded halves back in order. The rounding instruction flushes
// denormals to zero and keeps NaN payloads, where c10 rounds denormals to nearest even like any
// other value and writes every NaN as 0x7FC0: the rare vector pair holding either is narrowed by
// c10's conversion instead, so the bits are those of the portable loop.
struct Avx512BFloat16x32 {
  using Element = c10::BFloat16;
  struct Vec {
    __m512 even, odd;
  };
  static constexpr size_t kLanes = 32;
  // Out of line: inlined, its code between the fold's vectors made GCC spill them to the stack.
  __attribute__((noinline, cold)) static void narrow_portably(c10::BFloat16* out,
                                                              const float* even,
                                                              const float* odd) {
    for (size_t j = 0; j < kLanes / 2; ++j) {
      out[2 * j] = static_cast<c10::BFloat16>(even[j]);
      out[2 * j + 1] = static_cast<c10::BFloat16>(odd[j]);
    }
  }
  OCCL_AVX512_BF16 static Vec widen(const c10::BFloat16* in) {
    const __m512i bits = _mm512_loadu_si512(in);
    return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, bits, 16)),  // as Avx512Half16
            _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0xFFFF0000)))};
  }
  OCCL_AVX512_BF16 static void narrow(c10::BFloat16* out, Vec values) {
    constexpr int kNanOrDenormal = 0x01 | 0x80 | 0x20;  // quiet NaN, signalling NaN, denormal
    if (_mm512_fpclass_ps_mask(values.even, kNanOrDenormal) |
        _mm512_fpclass_ps_mask(values.odd, kNanOrDenormal)) {
      alignas(64) float even[kLanes / 2], odd[kLanes / 2];
      _mm512_store_ps(even, values.even);
      _mm512_store_ps(odd, values.odd);
      return narrow_portably(out, even, odd);
    }
    // The rounded evens land in words 0-15 and the odds in 16-31; word k comes from this index.
    const __m512i interleave = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
        23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i rounded =
        reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(values.odd, values.even));
    _mm512_storeu_si512(out, _mm512_permutexvar_epi16(interleave, rounded));
  }
  // Every NaN leaves as 0x7FC0, so which NaN a sum or product keeps cannot change the result:
  // those need no NaN pairing. MIN and MAX can, so they keep the scalar definitions.
  template <ReduceOp Op>
  OCCL_AVX512_BF16 static Vec apply(Vec a, Vec b) {
    if constexpr (Op == ReduceOp::Sum) {
      return {_mm512_add_ps(a.even, b.even), _mm512_add_ps(a.odd, b.odd)};
    } else if constexpr (Op == ReduceOp::Product) {
      return {_mm512_mul_ps(a.even, b.even), _mm512_mul_ps(a.odd, b.odd)};
    } else {
      return {apply_to_vector<Op>(a.even, b.even), apply_to_vector<Op>(a.odd, b.odd)};
    }
  }
};

// reduce_typed's fold for the half types, kLanes at a time (Lanes): every source's elements
// widened to float32, combined in rank order, rounded once; the last few through c10's
// conversions. dst[i] is written after every source's [i] was read, so dst may alias a source.
// Two sources (two ranks, and every ring step) get a loop of their own, with the count known to
// the compiler: bfloat16's then ran at 0.87-0.90 of float32's rate, against 0.71-0.85 without.
// It only ever runs inlined into the callers below (flatten), whose targets give Lanes' vectors
// their instructions: no vector crosses a call, so GCC's note on their ABI does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename Lanes, ReduceOp Op, int kSources = 0>  // 0: as many as `sources` says
inline void fold_wide(typename Lanes::Element* dst, const void* const* srcs, int sources,
                      size_t count) {
  if constexpr (kSources == 0) {
    if (sources == 2) return fold_wide<Lanes, Op, 2>(dst, srcs, sources, count);
  }
  const int n = kSources == 0 ? sources : kSources;
  using Element = typename Lanes::Element;
  auto src = [srcs](int s) { return static_cast<const Element*>(srcs[s]); };
  constexpr size_t kLanes = Lanes::kLanes;
  // Four vectors per pass: one alone leaves the loop bound by its own bookkeeping.
  constexpr size_t kVectors = 4;
  size_t i = 0;
  constexpr size_t kPassBytes = kVectors * kLanes * sizeof(Element);
  for (; i + kVectors * kLanes <= count; i += kVectors * kLanes) {
    for (int s = 0; s < n; ++s) {
      const char* at = reinterpret_cast<const char*>(src(s) + i);
      for (size_t line = 0; line < kPassBytes; line += 64) prefetch_ahead_of(at + line);
    }
    typename Lanes::Vec acc[kVectors];
    for (size_t k = 0; k < kVectors; ++k) acc[k] = Lanes::widen(src(0) + i + k * kLanes);
    for (int s = 1; s < n; ++s) {
      for (size_t k = 0; k < kVectors; ++k) {
        acc[k] = Lanes::template apply<Op>(acc[k], Lanes::widen(src(s) + i + k * kLanes));
      }
    }
    for (size_t k = 0; k < kVectors; ++k) Lanes::narrow(dst + i + k * kLanes, acc[k]);
  }
  for (; i < count; ++i) {
    float value = static_cast<float>(src(0)[i]);
    for (int s = 1; s < n; ++s) value = apply<Op>(value, static_cast<float>(src(s)[i]));
    dst[i] = static_cast<Element>(value);
  }
}
#pragma GCC diagnostic pop

template <ReduceOp Op>
OCCL_F16C void reduce_half_f16c(c10::Half* dst, const void* const* srcs, int n, size_t count) {
  fold_wide<F16cHalf8, Op>(dst, srcs, n, count);
}

template <ReduceOp Op>
OCCL_AVX512 void reduce_half_avx512(c10::Half* dst, const void* const* srcs, int n, size_t count) {
  fold_wide<Avx512Half16, Op>(dst, srcs, n, count);
}

// float16 SUM or PRODUCT of two sources in float16 arithmetic (AVX512-FP16), 32 lanes. float32
// has 24 bits, at least 2 x 11 + 2, so rounding an exact sum or product to float32 and then to
// float16 gives what rounding it to float16 at once gives (double rounding is innocuous at that
// margin; every pair of float16 values was checked, both ops, with a NaN `a` paired with itself
// as below): the float32 loop's bits without its conversions. A third source would round a
// partial result, so folds of more sources stay in float32.
template <ReduceOp Op>
OCCL_AVX512_FP16 void combine_half_natively(c10::Half* dst, const c10::Half* a,
                                            const c10::Half* b, size_t count) {
  static_assert(Op == ReduceOp::Sum || Op == ReduceOp::Product);
  constexpr int kNan = 0x01 | 0x80;  // quiet, signalling
  constexpr size_t kLanes = 32;
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    prefetch_ahead_of(a + i);
    prefetch_ahead_of(b + i);
    const __m512h x = _mm512_castsi512_ph(_mm512_loadu_si512(a + i));
    __m512h y = _mm512_castsi512_ph(_mm512_loadu_si512(b + i));
    y = _mm512_mask_blend_ph(_mm512_fpclass_ph_mask(x, kNan), y, x);  // b unless a is NaN
    const __m512h result = Op == ReduceOp::Sum ? _mm512_add_ph(x, y) : _mm512_mul_ph(x, y);
    __m512i bits = _mm512_castph_si512(result);
    if (const __mmask32 nans = _mm512_fpclass_ph_mask(result, kNan)) {  // as c10 writes them
      const __m512i canonical = _mm512_or_si512(
          _mm512_and_si512(bits, _mm512_set1_epi16(static_cast<int16_t>(0x8000))),
          _mm512_set1_epi16(0x7E00));
      bits = _mm512_mask_mov_epi16(bits, nans, canonical);
    }
    _mm512_storeu_si512(dst + i, bits);
  }
  for (; i < count; ++i) {
    dst[i] = static_cast<c10::Half>(apply<Op>(static_cast<float>(a[i]), static_cast<float>(b[i])));
  }
}

template <ReduceOp Op>
OCCL_AVX512_BF16 void reduce_bfloat16_avx512(c10::BFloat16* dst, const void* const* srcs, int n,
                                              size_t count) {
  fold_wide<Avx512BFloat16x32, Op>(dst, srcs, n, count);
}
#endif

// dst = srcs[0] op ... op srcs[n-1], n >= 2, in loops of width W. With more than two sources it
// folds source by source over a block rather than element by element, so that each step is a
// two-input loop that vectorises; every element still sees srcs[0], srcs[1], ... in order.
// dst is written only by the last step, after every source's block has been read, so dst
// may alias any source.
template <Width W, ReduceOp Op, typename T>
void fold_in_blocks(T* dst, const void* const* srcs, int n, size_t count) {
  using A = Acc<T>;
  auto src = [srcs](int s) { return static_cast<const T*>(srcs[s]); };
  if (n == 2) return combine<W, Op, A>(dst, src(0), src(1), count);  // the ring's case
  A acc[kBlockElements];
  for (size_t begin = 0; begin < count; begin += kBlockElements) {
    const size_t len = std::min(kBlockElements, count - begin);
    combine<W, Op, A>(acc, src(0) + begin, src(1) + begin, len);
    for (int s = 2; s < n - 1; ++s) combine<W, Op, A>(acc, acc, src(s) + begin, len);
    combine<W, Op, A>(dst + begin, acc, src(n - 1) + begin, len);
  }
}

template <ReduceOp Op, typename T>
void reduce_typed(T* dst, const void* const* srcs, int n, size_t count) {
  using A = Acc<T>;
#ifdef OCCL_HAS_FLOAT16_INSTRUCTIONS
  if constexpr (std::is_same_v<T, c10::Half>) {
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Product) {
      if (n == 2 && use_avx512_fp16()) {
        return combine_half_natively<Op>(dst, static_cast<const c10::Half*>(srcs[0]),
                                         static_cast<const c10::Half*>(srcs[1]), count);
      }
    }
    if (use_avx512()) return reduce_half_avx512<Op>(dst, srcs, n, count);
    if (use_f16c()) return reduce_half_f16c<Op>(dst, srcs, n, count);
  }
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (use_avx512_bf16()) return reduce_bfloat16_avx512<Op>(dst, srcs, n, count);
  }
#endif
  if (n == 1) {  // still a round trip through A, as for n > 1 (it canonicalises half-type NaNs)
    transform(dst, static_cast<const T*>(srcs[0]), count, [](A v) { return v; });
    return;
  }
  with_width(count * sizeof(T),
             [&](auto width) { fold_in_blocks<decltype(width)::value, Op>(dst, srcs, n, count); });
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
