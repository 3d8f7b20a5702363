// The GPU half of channel_sums.hpp: a channel's elements split over ChannelSumSplits blocks (grid x), the channels over
// grid y; each block adds its stretch in float, thread by thread and then as a tree in shared memory, and writes its
// sums (scaled by alpha where it is the channel's only block); a second kernel adds a channel's partial sums in block
// order.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "core/channel_sums.hpp"
#include "core/cuda_check.hpp"

namespace crema {

constexpr int kChannelSumThreads = 256;

// Block (s, c) sums the channel's elements s * 256 + t, stepping by splits * 256; with one split it writes
// alpha * sum to sums[term * channels + c], else the raw sum to partial[(term * channels + c) * splits + s].
template <typename Rule>
__global__ void channel_sums_kernel(int outer, int channels, int inner, int splits, Rule rule, float alpha,
                                    float* out) {
  constexpr int kTerms = Rule::kTerms;
  __shared__ float shared[kTerms][kChannelSumThreads];
  // A channel's k-th element is (o, i) = (k / inner, k % inner); a thread steps k by `stride`, so (o, i) by the
  // stride's own quotient and remainder, with no division in the loop (the blob's count fits an int).
  const int per_channel = outer * inner;
  const int s = blockIdx.x;
  const int stride = splits * kChannelSumThreads;
  const int stride_o = inner > 0 ? stride / inner : 0, stride_i = inner > 0 ? stride % inner : 0;
  for (int c = blockIdx.y; c < channels; c += gridDim.y) {
    float total[kTerms] = {};
    float terms[kTerms];
    const int first = s * kChannelSumThreads + static_cast<int>(threadIdx.x);
    int o = inner > 0 ? first / inner : 0, i = inner > 0 ? first % inner : 0;
    for (int k = first; k < per_channel; k += stride) {
      rule((o * channels + c) * inner + i, c, terms);
      for (int t = 0; t < kTerms; ++t) total[t] += terms[t];
      o += stride_o;
      i += stride_i;
      if (i >= inner) {
        i -= inner;
        ++o;
      }
    }
    for (int t = 0; t < kTerms; ++t) shared[t][threadIdx.x] = total[t];
    __syncthreads();
    for (int half = kChannelSumThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)
        for (int t = 0; t < kTerms; ++t) shared[t][threadIdx.x] += shared[t][threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x < kTerms) {
      const int t = threadIdx.x;
      if (splits == 1)
        out[t * channels + c] = alpha * shared[t][0];
      else
        out[(static_cast<long long>(t) * channels + c) * splits + s] = shared[t][0];
    }
    __syncthreads();  // the next channel's sums reuse the shared memory
  }
}

// sums[k] = alpha * (partial[k * splits] + ... + partial[k * splits + splits - 1]), in that order, for the `n`
// (term, channel) pairs.
static __global__ void channel_sums_finish_kernel(int n, int splits, float alpha, const float* partial, float* sums) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += blockDim.x * gridDim.x) {
    float total = 0.f;
    for (int s = 0; s < splits; ++s) total += partial[static_cast<long long>(k) * splits + s];
    sums[k] = alpha * total;
  }
}

template <typename Rule>
void sum_per_channel_gpu(Context& context, int outer, int channels, int inner, const Rule& rule, float alpha,
                         float* sums, float* scratch) {
  if (channels <= 0) return;
  const int splits = ChannelSumSplits(static_cast<long long>(outer) * inner);
  const dim3 grid(splits, std::min(channels, 65535));
  channel_sums_kernel<<<grid, kChannelSumThreads, 0, context.stream()>>>(outer, channels, inner, splits, rule, alpha,
                                                                         splits == 1 ? sums : scratch);
  CREMA_CUDA_CHECK(cudaGetLastError());
  if (splits == 1) return;
  const int n = Rule::kTerms * channels;
  const int blocks = std::min(65535, (n + kChannelSumThreads - 1) / kChannelSumThreads);
  channel_sums_finish_kernel<<<blocks, kChannelSumThreads, 0, context.stream()>>>(n, splits, alpha, scratch, sums);
  CREMA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace crema

// Compiles the GPU pass of `Rule` (at namespace scope of a .cu file, outside namespace crema).
#define CREMA_GPU_CHANNEL_SUMS(Rule) \
  template void crema::sum_per_channel_gpu<Rule>(crema::Context&, int, int, int, const Rule&, float, float*, float*)
