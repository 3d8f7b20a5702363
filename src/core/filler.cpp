#include "core/filler.hpp"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/philox.hpp"

namespace crema {

namespace {

// The random fillers draw counter-based numbers (Philox4x32-10, core/philox.hpp): one 64-bit key from the layer's
// stream per fill (two of its 32-bit draws, whatever the blob's size), then value i of the fill from (key, i) alone.
// So a fill runs on every OpenMP thread at once, vectorises, and gives the same values whatever the thread count.
// Each Philox block (counter j) gives values 4j .. 4j+3.
uint64_t DrawKey(RandomStream* random) {
  const uint64_t high = random->NextUint32();
  return (high << 32) | random->NextUint32();
}

// Below this many values a fill runs on the calling thread (a parallel region costs more than the values).
constexpr int kParallelFill = 1 << 15;

// A uniform float in [0, 1) from 32 random bits: the top 24, so every value is exact (as RandomStream::Uniform).
inline float UnitFloat(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.f / 16777216.f); }

// Calls make(block bits, out[4]) for each block of four values, writing data[0, n).
template <typename Make>
void FillBlocks(uint64_t key, int n, float* data, Make make) {
  const int64_t blocks = (static_cast<int64_t>(n) + 3) / 4;
  const uint32_t key0 = static_cast<uint32_t>(key), key1 = static_cast<uint32_t>(key >> 32);
#pragma omp parallel for schedule(static) if (n >= kParallelFill)
  for (int64_t j = 0; j < blocks; ++j) {
    const Philox4x32 bits = Philox4x32_10({{static_cast<uint32_t>(j), static_cast<uint32_t>(j >> 32), 0u, 0u}}, key0, key1);
    float out[4];
    make(bits, out);
    const int64_t first = 4 * j;
    const int64_t count = std::min<int64_t>(4, n - first);
    for (int64_t k = 0; k < count; ++k) data[first + k] = out[k];
  }
}

void FillUniform(uint64_t key, int n, float low, float high, float* data) {
  const float range = high - low;
  FillBlocks(key, n, data, [low, range](const Philox4x32& bits, float* out) {
    for (int k = 0; k < 4; ++k) out[k] = low + range * UnitFloat(bits.v[k]);
  });
}

// Box-Muller on each pair of a block's values: radius from the first (in (0, 1], never 0), angle from the second,
// both normals of the pair kept.
void FillGaussian(uint64_t key, int n, float mean, float stddev, float* data) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  FillBlocks(key, n, data, [mean, stddev](const Philox4x32& bits, float* out) {
    for (int pair = 0; pair < 2; ++pair) {
      const float u1 = static_cast<float>((bits.v[2 * pair] >> 8) + 1) * (1.f / 16777216.f);
      const float angle = kTwoPi * UnitFloat(bits.v[2 * pair + 1]);
      const float radius = std::sqrt(-2.f * std::log(u1));
      out[2 * pair] = mean + stddev * (radius * std::cos(angle));
      out[2 * pair + 1] = mean + stddev * (radius * std::sin(angle));
    }
  });
}

// Fan-in and fan-out as Caffe defines them for a weight blob of shape (out, in, k...):
// fan_in = count / shape[0], fan_out = count / shape[1].
void fans(const Blob& blob, float* fan_in, float* fan_out) {
  CREMA_CHECK(blob.num_axes() >= 1 && blob.shape(0) > 0) << "cannot compute fan-in of a blob of shape "
                                                         << blob.shape_string();
  *fan_in = static_cast<float>(blob.count()) / blob.shape(0);
  // A blob with one axis (a bias) has no input axis: its fan-out is its whole size.
  *fan_out = blob.num_axes() > 1 && blob.shape(1) > 0 ? static_cast<float>(blob.count()) / blob.shape(1)
                                                      : static_cast<float>(blob.count());
}

float variance_scale(const FillerParameter& param, const Blob& blob) {
  float fan_in, fan_out;
  fans(blob, &fan_in, &fan_out);
  switch (param.variance_norm()) {
    case FillerParameter::FAN_OUT:
      return fan_out;
    case FillerParameter::AVERAGE:
      return (fan_in + fan_out) / 2.f;
    default:
      return fan_in;
  }
}

}  // namespace

std::vector<std::string> KnownFillerTypes() {
  return {"constant", "uniform", "gaussian", "positive_unitball", "xavier", "msra", "bilinear"};
}

void Fill(const FillerParameter& param, Blob* blob, RandomStream* random) {
  const std::string& type = param.type();
  const int n = blob->count();
  float* data = blob->mutable_cpu_data();
  if (type == "constant") {
    for (int i = 0; i < n; ++i) data[i] = param.value();
  } else if (type == "uniform") {
    CREMA_CHECK(param.min() <= param.max()) << "uniform filler: min " << param.min() << " exceeds max "
                                            << param.max();
    FillUniform(DrawKey(random), n, param.min(), param.max(), data);
  } else if (type == "gaussian") {
    FillGaussian(DrawKey(random), n, param.mean(), param.std(), data);
    if (param.sparse() >= 0) {
      // Keep each weight with probability sparse / num_outputs (the first axis), so each input feeds about
      // `sparse` outputs, as Caffe's schema defines the field.
      CREMA_CHECK(blob->num_axes() >= 1 && blob->shape(0) > 0)
          << "sparse gaussian filler needs a non-empty blob, got " << blob->shape_string();
      const float keep = static_cast<float>(param.sparse()) / blob->shape(0);
      std::vector<float> draws(n);
      FillUniform(DrawKey(random), n, 0.f, 1.f, draws.data());
      for (int i = 0; i < n; ++i)
        if (!(draws[i] < keep)) data[i] = 0.f;
    }
  } else if (type == "positive_unitball") {
    // Uniform in [0, 1), then each row (all but the first axis) scaled to sum to one.
    CREMA_CHECK(blob->num_axes() >= 1 && blob->shape(0) > 0) << "positive_unitball filler needs a non-empty blob";
    FillUniform(DrawKey(random), n, 0.f, 1.f, data);
    const int rows = blob->shape(0);
    const int width = n / rows;
    for (int r = 0; r < rows; ++r) {
      double sum = 0;
      for (int j = 0; j < width; ++j) sum += data[r * width + j];
      for (int j = 0; j < width; ++j) data[r * width + j] = static_cast<float>(data[r * width + j] / sum);
    }
  } else if (type == "xavier") {
    // Uniform in [-a, a] with a = sqrt(3 / fan): variance 1 / fan.
    const float limit = std::sqrt(3.f / variance_scale(param, *blob));
    FillUniform(DrawKey(random), n, -limit, limit, data);
  } else if (type == "msra") {
    // Gaussian with variance 2 / fan (He et al.).
    const float stddev = std::sqrt(2.f / variance_scale(param, *blob));
    FillGaussian(DrawKey(random), n, 0.f, stddev, data);
  } else if (type == "bilinear") {
    // Bilinear up-sampling kernels for a deconvolution: shape (C, 1, K, K) with square K.
    CREMA_CHECK(blob->num_axes() == 4 && blob->shape(2) == blob->shape(3))
        << "bilinear filler needs a 4-d blob with square kernels, got " << blob->shape_string();
    const int kernel = blob->shape(3);
    const int factor = (kernel + 1) / 2;  // ceil(kernel / 2)
    // Centre of the kernel in units of `factor`, so each tap's weight is its linear-interpolation weight.
    const float centre = (2.f * factor - 1 - factor % 2) / (2.f * factor);
    for (int i = 0; i < n; ++i) {
      const float x = static_cast<float>(i % kernel) / factor;
      const float y = static_cast<float>((i / kernel) % kernel) / factor;
      data[i] = (1 - std::fabs(x - centre)) * (1 - std::fabs(y - centre));
    }
  } else {
    std::string known;
    for (const auto& name : KnownFillerTypes()) known += (known.empty() ? "" : ", ") + name;
    CREMA_FAIL() << "unknown filler type \"" << type << "\"; known types: " << known;
  }
}

}  // namespace crema
