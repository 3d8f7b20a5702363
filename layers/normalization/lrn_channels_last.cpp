// Built with -fno-math-errno (CMakeLists.txt): the square roots then vectorise. Nothing reads errno; a root of a
// negative number (a negative k) is NaN either way.
#include "layers/normalization/lrn_channels_last.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/common.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// One position's channels into `y`: `padded` holds size - 1 zeros around room for the squares, `sums` room for the
// windows.
CREMA_ALWAYS_INLINE void OnePosition(const float* __restrict x, float* __restrict y, float* __restrict padded,
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

CREMA_VECTOR_CLONES void FloatPosition(const float* __restrict x, float* __restrict y, float* __restrict padded,
                                       float* __restrict sums, int channels, int size, float k, float factor,
                                       float beta) {
  OnePosition(x, y, padded, sums, channels, size, k, factor, beta);
}

// The position's results rounded to integers at `scale` and saturated to [low, high], as the readers' quantizing
// reorders round (to nearest, ties to even) and saturate.
template <class Integer>
CREMA_VECTOR_CLONES void IntegerPosition(const float* __restrict x, Integer* __restrict q, float* __restrict padded,
                                         float* __restrict sums, float* __restrict y, int channels, int size, float k,
                                         float factor, float beta, float scale, float low, float high) {
  OnePosition(x, y, padded, sums, channels, size, k, factor, beta);
  for (int c = 0; c < channels; ++c) {
    const float rounded = std::nearbyint(y[c] * scale);
    q[c] = static_cast<Integer>(rounded < low ? low : rounded > high ? high : rounded);
  }
}

// The position's results rounded to bf16, as the readers' converting reorders round them.
CREMA_VECTOR_CLONES void Bfloat16Position(const float* __restrict x, uint16_t* __restrict b, float* __restrict padded,
                                          float* __restrict sums, float* __restrict y, int channels, int size, float k,
                                          float factor, float beta) {
  OnePosition(x, y, padded, sums, channels, size, k, factor, beta);
  for (int c = 0; c < channels; ++c) b[c] = ToBfloat16(y[c]);
}

}  // namespace

void LRNAcrossChannelsLast(const float* x, void* y, const Quantization& quantization, long long positions, int channels,
                           int size, float k, float factor, float beta) {
  const float scale = quantization.scale;
  CREMA_CHECK(quantization.type != ElementType::kFloat16)
      << "the channels-last LRN writes 32-bit floats, bf16 or 8-bit integers, not float16";
#pragma omp parallel if (positions * channels >= ParallelElementThreshold())
  {
    std::vector<float> padded(static_cast<size_t>(channels + size - 1), 0.f), sums(static_cast<size_t>(channels)),
        values(static_cast<size_t>(channels));
#pragma omp for schedule(static)
    for (long long p = 0; p < positions; ++p) {
      const float* in = x + p * channels;
      switch (quantization.type) {
        case ElementType::kBfloat16:
          Bfloat16Position(in, static_cast<uint16_t*>(y) + p * channels, padded.data(), sums.data(), values.data(),
                           channels, size, k, factor, beta);
          break;
        case ElementType::kFloat16:  // refused above
        case ElementType::kFloat32:
          FloatPosition(in, static_cast<float*>(y) + p * channels, padded.data(), sums.data(), channels, size, k,
                        factor, beta);
          break;
        case ElementType::kUInt8:
          IntegerPosition(in, static_cast<uint8_t*>(y) + p * channels, padded.data(), sums.data(), values.data(),
                          channels, size, k, factor, beta, scale, 0.f, 255.f);
          break;
        case ElementType::kInt8:
          IntegerPosition(in, static_cast<int8_t*>(y) + p * channels, padded.data(), sums.data(), values.data(),
                          channels, size, k, factor, beta, scale, -128.f, 127.f);
          break;
      }
    }
  }
}

}  // namespace crema
