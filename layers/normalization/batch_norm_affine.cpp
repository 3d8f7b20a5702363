#include "layers/normalization/batch_norm_affine.hpp"

#include <cstddef>
#include <vector>

#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// ReLU's rule (layers/neuron/relu.hpp) at slope 0: a NaN stays one.
CREMA_ALWAYS_INLINE float Rectified(float z) { return z > 0.f ? z : 0.f * z; }

// dx in floats, or in bf16 (uint16_t).
template <typename Out>
struct Operands {
  const float* dy;
  const float* xhat;
  const float* inv_std;
  const float* gamma;
  const float* beta;
  bool relu, batch_statistics;
  Out* dx;
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

template <int kBlock, typename Out>
CREMA_ALWAYS_INLINE void ForwardPlane(int b, const float* xhat, const float* scale, const float* shift, bool relu,
                                      Out* y, int spatial) {
  if (relu) {
    for (int s = 0; s < spatial; ++s)
      for (int l = 0; l < b; ++l) y[s * b + l] = StoredAs(Rectified(scale[l] * xhat[s * b + l] + shift[l]), y);
  } else {
    for (int s = 0; s < spatial; ++s)
      for (int l = 0; l < b; ++l) y[s * b + l] = StoredAs(scale[l] * xhat[s * b + l] + shift[l], y);
  }
}

// Item n's channel block k: its top from its normalized values.
template <int kBlock, typename Out>
CREMA_ALWAYS_INLINE void ForwardBlock(const ChannelGrid& g, int n, int k, const float* xhat, const float* gamma,
                                      const float* beta, bool relu, Out* y) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  LaneValues<kBlock, float> scale(b), shift(b);
  for (int l = 0; l < b; ++l) {
    scale.data()[l] = gamma[k * b + l];
    shift.data()[l] = beta != nullptr ? beta[k * b + l] : 0.f;
  }
  const size_t offset = (static_cast<size_t>(n) * blocks + k) * static_cast<size_t>(g.spatial) * b;
  ForwardPlane<kBlock>(kBlock > 0 ? kBlock : b, xhat + offset, scale.data(), shift.data(), relu, y + offset, g.spatial);
}

// The gradient that reaches z = gamma * x_hat + beta: dy where the ReLU passed z on.
CREMA_ALWAYS_INLINE float ReachingZ(float dy, float xhat, float scale, float shift, bool relu) {
  if (!relu) return dy;
  return scale * xhat + shift > 0.f ? dy : 0.f * dy;
}

// Channel block k's gradients.
template <int kBlock, typename Out>
CREMA_ALWAYS_INLINE void BackwardBlock(const ChannelGrid& g, const Operands<Out>& a, int k) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  const int lanes = kBlock > 0 ? kBlock : b;
  const size_t plane = static_cast<size_t>(g.spatial) * b;
  const long long m = static_cast<long long>(g.num) * g.spatial;
  const bool sums = a.gamma_diff != nullptr || a.beta_diff != nullptr || (a.dx != nullptr && a.batch_statistics);
  {
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
    if (a.dx == nullptr) return;
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
      Out* dx = a.dx + offset;
      for (int s = 0; s < g.spatial; ++s)
        for (int l = 0; l < lanes; ++l) {
          const int j = s * lanes + l;
          const float dz = ReachingZ(dy[j], xhat[j], gamma[l], beta[l], a.relu);
          dx[j] = StoredAs(f[l] * (dz - mz[l] - xhat[j] * mzx[l]), dx);
        }
    }
  }
}

// The per-block bodies, built for each vector width (core/vector_clones.hpp): target_clones takes plain functions, one
// for each block and top type, and the threads' loops call them (a loop of OpenMP's inside such a function, or in a
// template it inlines, would be outlined once, for the baseline only).
#define CREMA_BLOCK_BODIES(SUFFIX, BLOCK, OUT)                                                                 \
  CREMA_VECTOR_CLONES void Forward##SUFFIX(const ChannelGrid& g, int n, int k, const float* xhat, const float* gamma, \
                                           const float* beta, bool relu, OUT* y) {                               \
    ForwardBlock<BLOCK>(g, n, k, xhat, gamma, beta, relu, y);                                                     \
  }                                                                                                               \
  CREMA_VECTOR_CLONES void Backward##SUFFIX(const ChannelGrid& g, const Operands<OUT>& a, int k) {                \
    BackwardBlock<BLOCK>(g, a, k);                                                                                \
  }
CREMA_BLOCK_BODIES(16, 16, float)
CREMA_BLOCK_BODIES(8, 8, float)
CREMA_BLOCK_BODIES(1, 1, float)
CREMA_BLOCK_BODIES(Any, 0, float)
CREMA_BLOCK_BODIES(16, 16, uint16_t)
CREMA_BLOCK_BODIES(8, 8, uint16_t)
CREMA_BLOCK_BODIES(1, 1, uint16_t)
CREMA_BLOCK_BODIES(Any, 0, uint16_t)
#undef CREMA_BLOCK_BODIES

// The body for a channel block of `block` lanes among the four.
template <typename Body>
Body ForBlock(int block, Body sixteen, Body eight, Body one, Body any) {
  return block == 16 ? sixteen : block == 8 ? eight : block == 1 ? one : any;
}

template <typename Out>
void BackwardInLayout(const ChannelGrid& grid, const Operands<Out>& a) {
  using Body = void (*)(const ChannelGrid&, const Operands<Out>&, int);
  const Body body = ForBlock<Body>(grid.block, Backward16, Backward8, Backward1, BackwardAny);
  const int blocks = grid.channels / grid.block;
  const bool threaded = static_cast<long long>(grid.num) * grid.spatial * grid.channels >= ParallelElementThreshold();
#pragma omp parallel for if (threaded) schedule(static)
  for (int k = 0; k < blocks; ++k) body(grid, a, k);
}

template <typename Out>
void ForwardInLayout(const ChannelGrid& g, const float* xhat, const float* gamma, const float* beta, bool relu,
                     Out* y) {
  using Body = void (*)(const ChannelGrid&, int, int, const float*, const float*, const float*, bool, Out*);
  const Body body = ForBlock<Body>(g.block, Forward16, Forward8, Forward1, ForwardAny);
  const int blocks = g.channels / g.block;
  const bool threaded = static_cast<long long>(g.num) * g.channels * g.spatial >= ParallelElementThreshold();
#pragma omp parallel for collapse(2) if (threaded) schedule(static)
  for (int n = 0; n < g.num; ++n)
    for (int k = 0; k < blocks; ++k) body(g, n, k, xhat, gamma, beta, relu, y);
}

}  // namespace

void AffineForwardLoops(const ChannelGrid& grid, const float* xhat, const float* gamma, const float* beta, bool relu,
                        float* y) {
  ForwardInLayout(grid, xhat, gamma, beta, relu, y);
}

void AffineForwardLoops(const ChannelGrid& grid, const float* xhat, const float* gamma, const float* beta, bool relu,
                        uint16_t* y) {
  ForwardInLayout(grid, xhat, gamma, beta, relu, y);
}

void AffineBackwardLoops(const ChannelGrid& grid, const float* dy, const float* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, float* dx,
                         float* gamma_diff, float* beta_diff) {
  BackwardInLayout(grid,
                   Operands<float>{dy, xhat, inv_std, gamma, beta, relu, batch_statistics, dx, gamma_diff, beta_diff});
}

void AffineBackwardLoops(const ChannelGrid& grid, const float* dy, const float* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, uint16_t* dx,
                         float* gamma_diff, float* beta_diff) {
  BackwardInLayout(
      grid, Operands<uint16_t>{dy, xhat, inv_std, gamma, beta, relu, batch_statistics, dx, gamma_diff, beta_diff});
}

}  // namespace crema
