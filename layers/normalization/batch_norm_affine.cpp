#include "layers/normalization/batch_norm_affine.hpp"

#include <cstddef>
#include <vector>

#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// ReLU's rule (layers/neuron/relu.hpp) at slope 0: a NaN stays one.
CREMA_ALWAYS_INLINE float Rectified(float z) { return z > 0.f ? z : 0.f * z; }

struct Operands {
  const float* dy;
  const float* xhat;
  const float* inv_std;
  const float* gamma;
  const float* beta;
  bool relu, batch_statistics;
  float* dx;
  float* gamma_diff;
  float* beta_diff;
};

// Block k's per-lane values: a block known at compile time (kBlock) lives in arrays the loops vectorize over; another
// (channels-last's) in vectors.
template <int kBlock, typename T>
struct LaneValues {
  explicit LaneValues(int) {}
  T* data() { return values; }
  T values[kBlock] = {};
};
template <typename T>
struct LaneValues<0, T> {
  explicit LaneValues(int lanes) : values(lanes, T()) {}
  T* data() { return values.data(); }
  std::vector<T> values;
};

template <int kBlock>
CREMA_ALWAYS_INLINE void ForwardPlane(int b, const float* xhat, const float* scale, const float* shift, bool relu,
                                      float* y, int spatial) {
  if (relu) {
    for (int s = 0; s < spatial; ++s)
      for (int l = 0; l < b; ++l) y[s * b + l] = Rectified(scale[l] * xhat[s * b + l] + shift[l]);
  } else {
    for (int s = 0; s < spatial; ++s)
      for (int l = 0; l < b; ++l) y[s * b + l] = scale[l] * xhat[s * b + l] + shift[l];
  }
}

template <int kBlock>
CREMA_ALWAYS_INLINE void Forward(const ChannelGrid& g, const float* xhat, const float* gamma, const float* beta,
                                 bool relu, float* y) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  const size_t plane = static_cast<size_t>(g.spatial) * b;
  const bool threaded = static_cast<long long>(g.num) * g.channels * g.spatial >= ParallelElementThreshold();
#pragma omp parallel for collapse(2) if (threaded) schedule(static)
  for (int n = 0; n < g.num; ++n)
    for (int k = 0; k < blocks; ++k) {
      LaneValues<kBlock, float> scale(b), shift(b);
      for (int l = 0; l < b; ++l) {
        scale.data()[l] = gamma[k * b + l];
        shift.data()[l] = beta != nullptr ? beta[k * b + l] : 0.f;
      }
      const size_t offset = (static_cast<size_t>(n) * blocks + k) * plane;
      ForwardPlane<kBlock>(kBlock > 0 ? kBlock : b, xhat + offset, scale.data(), shift.data(), relu, y + offset,
                           g.spatial);
    }
}

// The gradient that reaches z = gamma * x_hat + beta: dy where the ReLU passed z on.
CREMA_ALWAYS_INLINE float ReachingZ(float dy, float xhat, float scale, float shift, bool relu) {
  if (!relu) return dy;
  return scale * xhat + shift > 0.f ? dy : 0.f * dy;
}

template <int kBlock>
CREMA_ALWAYS_INLINE void Backward(const ChannelGrid& g, const Operands& a) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  const int lanes = kBlock > 0 ? kBlock : b;
  const size_t plane = static_cast<size_t>(g.spatial) * b;
  const long long m = static_cast<long long>(g.num) * g.spatial;
  const bool threaded = m * g.channels >= ParallelElementThreshold();
  const bool sums = a.gamma_diff != nullptr || a.beta_diff != nullptr || (a.dx != nullptr && a.batch_statistics);
#pragma omp parallel for if (threaded) schedule(static)
  for (int k = 0; k < blocks; ++k) {
    LaneValues<kBlock, float> scale(b), shift(b);
    LaneValues<kBlock, double> sum_dz(b), sum_dz_xhat(b);
    for (int l = 0; l < lanes; ++l) {
      scale.data()[l] = a.gamma != nullptr ? a.gamma[k * b + l] : 1.f;
      shift.data()[l] = a.beta != nullptr ? a.beta[k * b + l] : 0.f;
    }
    const float* gamma = scale.data();
    const float* beta = shift.data();
    if (sums) {
      double* sz = sum_dz.data();
      double* szx = sum_dz_xhat.data();
      for (int n = 0; n < g.num; ++n) {
        const size_t offset = (static_cast<size_t>(n) * blocks + k) * plane;
        const float* dy = a.dy + offset;
        const float* xhat = a.xhat + offset;
        for (int s = 0; s < g.spatial; ++s)
          for (int l = 0; l < lanes; ++l) {
            const int j = s * lanes + l;
            const float dz = ReachingZ(dy[j], xhat[j], gamma[l], beta[l], a.relu);
            sz[l] += dz;
            szx[l] += static_cast<double>(dz) * xhat[j];
          }
      }
      for (int l = 0; l < lanes; ++l) {
        if (a.beta_diff != nullptr) a.beta_diff[k * b + l] += static_cast<float>(sz[l]);
        if (a.gamma_diff != nullptr) a.gamma_diff[k * b + l] += static_cast<float>(szx[l]);
      }
    }
    if (a.dx == nullptr) continue;
    // dx = inv_std * gamma * (dz - mean(dz) - x_hat * mean(dz * x_hat)), in float from the means.
    LaneValues<kBlock, float> factor(b), mean_dz(b), mean_dz_xhat(b);
    for (int l = 0; l < lanes; ++l) {
      factor.data()[l] = a.inv_std[k * b + l] * gamma[l];
      const bool means = a.batch_statistics && m > 0;
      mean_dz.data()[l] = means ? static_cast<float>(sum_dz.data()[l] / m) : 0.f;
      mean_dz_xhat.data()[l] = means ? static_cast<float>(sum_dz_xhat.data()[l] / m) : 0.f;
    }
    const float* f = factor.data();
    const float* mz = mean_dz.data();
    const float* mzx = mean_dz_xhat.data();
    for (int n = 0; n < g.num; ++n) {
      const size_t offset = (static_cast<size_t>(n) * blocks + k) * plane;
      const float* dy = a.dy + offset;
      const float* xhat = a.xhat + offset;
      float* dx = a.dx + offset;
      for (int s = 0; s < g.spatial; ++s)
        for (int l = 0; l < lanes; ++l) {
          const int j = s * lanes + l;
          const float dz = ReachingZ(dy[j], xhat[j], gamma[l], beta[l], a.relu);
          dx[j] = f[l] * (dz - mz[l] - xhat[j] * mzx[l]);
        }
    }
  }
}

CREMA_VECTOR_CLONES void Forward16(const ChannelGrid& g, const float* xhat, const float* gamma, const float* beta,
                                   bool relu, float* y) {
  Forward<16>(g, xhat, gamma, beta, relu, y);
}
CREMA_VECTOR_CLONES void Forward8(const ChannelGrid& g, const float* xhat, const float* gamma, const float* beta,
                                  bool relu, float* y) {
  Forward<8>(g, xhat, gamma, beta, relu, y);
}
CREMA_VECTOR_CLONES void Backward16(const ChannelGrid& g, const Operands& a) { Backward<16>(g, a); }
CREMA_VECTOR_CLONES void Backward8(const ChannelGrid& g, const Operands& a) { Backward<8>(g, a); }

}  // namespace

void AffineForwardLoops(const ChannelGrid& grid, const float* xhat, const float* gamma, const float* beta, bool relu,
                        float* y) {
  if (grid.block == 16) return Forward16(grid, xhat, gamma, beta, relu, y);
  if (grid.block == 8) return Forward8(grid, xhat, gamma, beta, relu, y);
  if (grid.block == 1) return Forward<1>(grid, xhat, gamma, beta, relu, y);
  Forward<0>(grid, xhat, gamma, beta, relu, y);
}

void AffineBackwardLoops(const ChannelGrid& grid, const float* dy, const float* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, float* dx,
                         float* gamma_diff, float* beta_diff) {
  const Operands a{dy, xhat, inv_std, gamma, beta, relu, batch_statistics, dx, gamma_diff, beta_diff};
  if (grid.block == 16) return Backward16(grid, a);
  if (grid.block == 8) return Backward8(grid, a);
  if (grid.block == 1) return Backward<1>(grid, a);
  Backward<0>(grid, a);
}

}  // namespace crema
