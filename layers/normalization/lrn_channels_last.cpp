// Built with -fno-math-errno (CMakeLists.txt): the square roots then vectorise. Nothing reads errno; a root of a
// negative number (a negative k) is NaN either way.
#include "layers/normalization/lrn_channels_last.hpp"

#include <cmath>
#include <vector>

#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// One position's channels: `padded` holds size - 1 zeros around room for the squares, `sums` room for the windows.
CREMA_VECTOR_CLONES void OnePosition(const float* __restrict x, float* __restrict y, float* __restrict padded,
                                     float* __restrict sums, int channels, int size, float k, float factor,
                                     float beta) {
  const int before = (size - 1) / 2;
  for (int c = 0; c < channels; ++c) {
    padded[before + c] = x[c] * x[c];
    sums[c] = 0.f;
  }
  for (int j = 0; j < size; ++j)
    for (int c = 0; c < channels; ++c) sums[c] += padded[c + j];
  if (beta == 0.75f) {  // Caffe's usual beta: s^-3/4 = r * sqrt(r) with r = 1 / sqrt(s)
    for (int c = 0; c < channels; ++c) {
      const float r = 1.f / std::sqrt(k + factor * sums[c]);
      y[c] = x[c] * r * std::sqrt(r);
    }
    return;
  }
  for (int c = 0; c < channels; ++c) y[c] = x[c] * std::pow(k + factor * sums[c], -beta);
}

}  // namespace

void LRNAcrossChannelsLast(const float* x, float* y, long long positions, int channels, int size, float k, float factor,
                           float beta) {
#pragma omp parallel if (positions * channels >= ParallelElementThreshold())
  {
    std::vector<float> padded(static_cast<size_t>(channels + size - 1), 0.f), sums(static_cast<size_t>(channels));
#pragma omp for schedule(static)
    for (long long p = 0; p < positions; ++p)
      OnePosition(x + p * channels, y + p * channels, padded.data(), sums.data(), channels, size, k, factor, beta);
  }
}

}  // namespace crema
