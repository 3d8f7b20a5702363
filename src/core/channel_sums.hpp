// Per-channel sums of a rule's terms, in one pass over a blob seen as outer x channels x inner (element j =
// (o * channels + c) * inner + i): the reductions of BatchNorm's statistics and gradients, and of a per-channel
// operand's gradient. A rule gives, for element j of channel c, kTerms values (1 to 4); the pass adds each term up per
// channel:
//
//   struct SumAndProduct {                    // sums of dy and of dy * x per channel
//     static constexpr int kTerms = 2;
//     const float* dy; const float* x;
//     CREMA_HOST_DEVICE void operator()(int j, int c, float* terms) const { terms[0] = dy[j]; terms[1] = dy[j] * x[j];
//     }
//   };
//   sum_per_channel(context(), outer, channels, inner, SumAndProduct{dy, x}, 1.f, sums, scratch);
//
// sums[t * channels + c] = alpha * (term t summed over channel c's outer * inner elements). A rule reads what one
// pass needs, so several sums cost one read of their operands (matrix-vector products against ones read a stored
// product per sum).
//
// On the CPU each channel is summed in double, in order (the channels split over the threads, so the bits do not
// depend on their number). On the GPU (a CUDA build's kernels, compiled where the layer's .cu file says
// CREMA_GPU_CHANNEL_SUMS(Rule): a rule without that line fails to link) a grid of blocks per channel, each block
// summing in float a stretch of the channel's elements, then, where a channel took several blocks, their partial sums
// added in a fixed order: the same bits on every run. `scratch` holds SumPerChannelScratch floats for those partial
// sums (none on the CPU).
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/common.hpp"
#include "core/context.hpp"
#include "core/element_type.hpp"  // CREMA_HOST_DEVICE
#include "core/threads.hpp"

namespace crema {

// How many blocks of the GPU's pass sum one channel: about 4096 elements each, at most 64 (the GPU's partial sums).
inline int ChannelSumSplits(long long per_channel) {
  constexpr long long kPerBlock = 4096;
  return static_cast<int>(std::min<long long>(64, std::max<long long>(1, (per_channel + kPerBlock - 1) / kPerBlock)));
}

// The floats sum_per_channel's GPU pass needs in `scratch` for a rule of `terms` terms (0 where one block sums a
// channel).
inline size_t SumPerChannelScratch(int outer, int channels, int inner, int terms) {
  const int splits = ChannelSumSplits(static_cast<long long>(outer) * inner);
  return splits > 1 ? static_cast<size_t>(terms) * channels * splits : 0;
}

// On the host: each channel's terms summed in double, in order.
template <typename Rule>
inline void sum_per_channel(int outer, int channels, int inner, const Rule& rule, float alpha, float* sums) {
  constexpr int kTerms = Rule::kTerms;
  static_assert(kTerms >= 1 && kTerms <= 4, "a channel-sum rule gives 1 to 4 terms");
  const long long per_channel = static_cast<long long>(outer) * inner;
  auto channel = [&](int c) {
    double total[kTerms] = {};
    float terms[kTerms];
    for (int o = 0; o < outer; ++o) {
      const int base = (o * channels + c) * inner;
      for (int i = 0; i < inner; ++i) {
        rule(base + i, c, terms);
        for (int t = 0; t < kTerms; ++t) total[t] += terms[t];
      }
    }
    for (int t = 0; t < kTerms; ++t) sums[t * channels + c] = alpha * static_cast<float>(total[t]);
  };
  if (channels < 2 || per_channel * channels < ParallelElementThreshold()) {
    for (int c = 0; c < channels; ++c) channel(c);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < channels; ++c) channel(c);
}

#ifdef CREMA_USE_CUDA
// On the context's GPU: defined in channel_sums.cuh, instantiated per rule by CREMA_GPU_CHANNEL_SUMS.
template <typename Rule>
void sum_per_channel_gpu(Context& context, int outer, int channels, int inner, const Rule& rule, float alpha,
                         float* sums, float* scratch);
#endif

// On the context's device.
template <typename Rule>
inline void sum_per_channel(Context& context, int outer, int channels, int inner, const Rule& rule, float alpha,
                            float* sums, float* scratch) {
  if (context.device() == Device::kGPU) {
#ifdef CREMA_USE_CUDA
    sum_per_channel_gpu(context, outer, channels, inner, rule, alpha, sums, scratch);
    return;
#else
    (void)scratch;
    CREMA_FAIL() << "this crema was built without CUDA (CPU_ONLY): no sum can run on a GPU";
#endif
  }
  sum_per_channel(outer, channels, inner, rule, alpha, sums);
}

}  // namespace crema
