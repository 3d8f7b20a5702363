// Loops over bf16 values in AVX512_BF16's instructions, for the CPUs that have them (the ones whose layers compute in
// bf16: onednn::HasBfloat16Kernels). A loop built from C++ (core/vector_clones.hpp's StoredAs) rounds 16 floats to bf16
// in some eight vector operations and a pack, and the bf16 rules' passes over memory (BatchNorm's, the residual sum's)
// were bound by those roundings; here a rounding is one instruction (vcvtneps2bf16) with the same result (ToBfloat16,
// core/element_type.hpp: to nearest, ties to even, denormals as zero, NaN kept quiet).
//
// A function written with these helpers carries CREMA_BF16_TARGET (its own build for that instruction set) and is
// called only where HasBfloat16Conversions() says so, behind `#if CREMA_BF16_LOOPS` (x86-64 builds by GCC or clang).
// Such a loop does the arithmetic of the loop it stands for, operation for operation (BatchNorm's: fused into the same
// multiply-adds as that loop's AVX-512 build), so that both give the same bits. Its body takes whole vectors; only a
// tail takes the masked forms below (on a Zen 5, a loop of masked loads and stores ran at about half the speed of plain
// ones).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/threads.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CREMA_BF16_LOOPS 1
#include <immintrin.h>
#else
#define CREMA_BF16_LOOPS 0
#endif

namespace crema {

#if CREMA_BF16_LOOPS
#define CREMA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define CREMA_BF16_INLINE CREMA_BF16_TARGET inline __attribute__((always_inline))

// Whether this CPU runs the functions built for CREMA_BF16_TARGET (checked once).
inline bool HasBfloat16Conversions() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma");
  return has;
}

// 16 bf16 values as floats. (The zero-masking forms over all 16 lanes: GCC 12 warns of the plain ones' undefined
// pass-through operand.)
CREMA_BF16_INLINE __m512 Widened(__m256i halves) {
  const __mmask16 all = 0xffff;
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, halves), 16));
}
// 16 floats rounded to bf16.
CREMA_BF16_INLINE __m256i Rounded(__m512 v) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)); }
// 16 elements as the floats they stand for, and 16 floats stored as the element type stores them.
CREMA_BF16_INLINE __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
CREMA_BF16_INLINE __m512 Load16(const uint16_t* p) {
  return Widened(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
CREMA_BF16_INLINE void Store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
CREMA_BF16_INLINE void Store16(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Rounded(v));
}
// 16 elements as a rule computing in bf16 reads them: rounded to bf16 (as they lie in bf16, or rounded from floats).
CREMA_BF16_INLINE __m512 LoadBfloat16Values(const uint16_t* p) { return Load16(p); }
CREMA_BF16_INLINE __m512 LoadBfloat16Values(const float* p) { return Widened(Rounded(_mm512_loadu_ps(p))); }
// The same for the first lanes of `lanes` (a loop's tail: lanes past it are neither read nor written; read as 0).
CREMA_BF16_INLINE __m512 Load16(const float* p, __mmask16 lanes) { return _mm512_maskz_loadu_ps(lanes, p); }
CREMA_BF16_INLINE __m512 Load16(const uint16_t* p, __mmask16 lanes) {
  return Widened(_mm256_maskz_loadu_epi16(lanes, p));
}
CREMA_BF16_INLINE void Store16(float* p, __m512 v, __mmask16 lanes) { _mm512_mask_storeu_ps(p, lanes, v); }
CREMA_BF16_INLINE void Store16(uint16_t* p, __m512 v, __mmask16 lanes) {
  _mm256_mask_storeu_epi16(p, lanes, Rounded(v));
}
CREMA_BF16_INLINE __m512 LoadBfloat16Values(const uint16_t* p, __mmask16 lanes) { return Load16(p, lanes); }
CREMA_BF16_INLINE __m512 LoadBfloat16Values(const float* p, __mmask16 lanes) {
  return Widened(Rounded(_mm512_maskz_loadu_ps(lanes, p)));
}
// The lanes of a tail of `count` (0 to 16) elements.
CREMA_BF16_INLINE __mmask16 FirstLanes(long long count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffffu : (1u << count) - 1u);
}
// ReLU's rule at slope `slope`, 16 lanes: z where z > 0, else slope * z (a NaN stays one; slope 0 gives -0 for a
// negative z).
CREMA_BF16_INLINE __m512 Leaky16(__m512 z, __m512 slope) {
  const __mmask16 positive = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_mask_blend_ps(positive, _mm512_mul_ps(slope, z), z);
}
#else
inline bool HasBfloat16Conversions() { return false; }
#endif

// `count` floats rounded to bf16 (ToBfloat16's rounding) from `from` into `to`, on the calling thread: one conversion
// instruction a vector where HasBfloat16Conversions(), else ToBfloat16 value by value.
void RoundToBfloat16(const float* from, long long count, uint16_t* to);

// Runs range(begin, end) over [0, count) in stretches of kBfloat16Stretch elements (whole vectors but the last), split
// over OpenMP's threads where `threaded` (core/threads.hpp): a loop above, each stretch on one thread.
constexpr long long kBfloat16Stretch = 16384;
template <typename Range>
void ForEachStretch(long long count, bool threaded, const Range& range) {
  ForEachStretch(count, kBfloat16Stretch, threaded, range);
}

}  // namespace crema
