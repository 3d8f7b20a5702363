// How fast one core runs AVX-512's bf16 dot product (vdpbf16ps: 32 products summed in pairs into 16 float lanes)
// against the float fused multiply-add (vfmadd: 16 products), each over eight independent accumulator chains, in
// GFLOP/s. A bf16 kernel can gain at most their ratio over a float one (docs/performance.md, "bf16 training").
// Built by hand on a CPU with AVX512_BF16 (not part of the build: it would not run elsewhere):
//
//   g++ -O2 -mavx512f -mavx512bf16 -o /tmp/bf16_rate benchmarks/bf16_instruction_rate.cpp && /tmp/bf16_rate
#include <immintrin.h>

#include <chrono>
#include <cstdio>

int main() {
  constexpr long kInstructions = 200000000;
  constexpr int kChains = 8;
  __m512 sums[kChains];
  const __m512 scale = _mm512_set1_ps(1.0001f), shift = _mm512_set1_ps(0.9999f);
  const __m512bh ones = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0 in every half-lane
  for (__m512& sum : sums) sum = _mm512_setzero_ps();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kInstructions / kChains; ++i)
    for (__m512& sum : sums) sum = _mm512_fmadd_ps(sum, scale, shift);
  const auto middle = std::chrono::steady_clock::now();
  for (long i = 0; i < kInstructions / kChains; ++i)
    for (__m512& sum : sums) sum = _mm512_dpbf16_ps(sum, ones, ones);
  const auto end = std::chrono::steady_clock::now();
  float total = 0;  // printed, so that the loops are not optimized away
  for (const __m512& sum : sums) total += _mm512_reduce_add_ps(sum);
  const double fma_seconds = std::chrono::duration<double>(middle - start).count();
  const double bf16_seconds = std::chrono::duration<double>(end - middle).count();
  std::printf("vfmadd %.1f GFLOP/s, vdpbf16ps %.1f GFLOP/s: bf16 %.2fx float (checksum %g)\n",
              kInstructions * 32 / fma_seconds / 1e9, kInstructions * 64 / bf16_seconds / 1e9,
              (kInstructions * 64 / bf16_seconds) / (kInstructions * 32 / fma_seconds), total);
  return 0;
}
