#include "layers/normalization/batch_norm_affine.hpp"

#include <cstddef>
#include <type_traits>
#include <vector>

#include "core/bf16_vectors.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// ReLU's rule (layers/neuron/relu.hpp) at slope 0: a NaN stays one.
CREMA_ALWAYS_INLINE float Rectified(float z) { return z > 0.f ? z : 0.f * z; }

// The bf16 rule's loops over blocks of 16 channels (the layout of the runs that compute in bf16 with AVX-512), in
// AVX512_BF16's conversions where the CPU has them (core/bf16_vectors.hpp): the same bits as the loops below.
#if CREMA_BF16_LOOPS
// Rectified, 16 lanes.
CREMA_BF16_INLINE __m512 Rectified16(__m512 z) { return Leaky16(z, _mm512_setzero_ps()); }
// ReachingZ, 16 lanes.
CREMA_BF16_INLINE __m512 ReachingZ16(__m512 dy, __m512 xhat, __m512 scale, __m512 shift, bool relu) {
  if (!relu) return dy;
  const __mmask16 passed = _mm512_cmp_ps_mask(_mm512_fmadd_ps(scale, xhat, shift), _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_mask_blend_ps(passed, _mm512_mul_ps(_mm512_setzero_ps(), dy), dy);
}

// NormalizePlane for a block of 16 (`spatial` positions of one item's block).
template <bool kRelu, typename X, typename Y>
CREMA_BF16_TARGET void NormalizePlane16(const X* x, const float* mean, const float* inv_std, const float* scale,
                                        const float* shift, uint16_t* xhat, Y* y, int spatial) {
  const __m512 mu = _mm512_loadu_ps(mean), is = _mm512_loadu_ps(inv_std);
  const __m512 gamma = _mm512_loadu_ps(scale), beta = _mm512_loadu_ps(shift);
  for (int s = 0; s < spatial; ++s) {
    const __m256i h = Rounded(_mm512_mul_ps(_mm512_sub_ps(LoadBfloat16Values(x + s * 16), mu), is));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xhat + s * 16), h);
    const __m512 z = _mm512_fmadd_ps(gamma, Widened(h), beta);
    Store16(y + s * 16, kRelu ? Rectified16(z) : z);
  }
}

// The bf16 rule's sums over one item's block of 16: into four chains of 16 floats each (`parts_dz`, `parts_dz_xhat`,
// 64 values each, as BackwardBlock's), position s into chain s % 4, the tail into chain 0.
template <typename Dy>
CREMA_BF16_TARGET void Bfloat16Sums16(const Dy* dy, const uint16_t* xhat, const float* scale, const float* shift,
                                      bool relu, int spatial, float* parts_dz, float* parts_dz_xhat) {
  constexpr int kChains = 4;
  const __m512 gamma = _mm512_loadu_ps(scale), beta = _mm512_loadu_ps(shift);
  __m512 dz_sums[kChains], dz_xhat_sums[kChains];
  for (int c = 0; c < kChains; ++c) {
    dz_sums[c] = _mm512_loadu_ps(parts_dz + c * 16);
    dz_xhat_sums[c] = _mm512_loadu_ps(parts_dz_xhat + c * 16);
  }
  int s = 0;
  for (; s + kChains <= spatial; s += kChains)
    for (int c = 0; c < kChains; ++c) {
      const int j = (s + c) * 16;
      const __m512 xh = Load16(xhat + j);
      const __m512 dz = ReachingZ16(LoadBfloat16Values(dy + j), xh, gamma, beta, relu);
      dz_sums[c] = _mm512_add_ps(dz_sums[c], dz);
      dz_xhat_sums[c] = _mm512_fmadd_ps(dz, xh, dz_xhat_sums[c]);
    }
  for (; s < spatial; ++s) {
    const __m512 xh = Load16(xhat + s * 16);
    const __m512 dz = ReachingZ16(LoadBfloat16Values(dy + s * 16), xh, gamma, beta, relu);
    dz_sums[0] = _mm512_add_ps(dz_sums[0], dz);
    dz_xhat_sums[0] = _mm512_fmadd_ps(dz, xh, dz_xhat_sums[0]);
  }
  for (int c = 0; c < kChains; ++c) {
    _mm512_storeu_ps(parts_dz + c * 16, dz_sums[c]);
    _mm512_storeu_ps(parts_dz_xhat + c * 16, dz_xhat_sums[c]);
  }
}

// The bf16 rule's dx over one item's block of 16: factor * (dz - mean(dz) - x_hat * mean(dz * x_hat)).
template <typename Dy, typename Out>
CREMA_BF16_TARGET void Bfloat16Gradient16(const Dy* dy, const uint16_t* xhat, const float* scale, const float* shift,
                                          bool relu, const float* factor, const float* mean_dz,
                                          const float* mean_dz_xhat, int spatial, Out* dx) {
  const __m512 gamma = _mm512_loadu_ps(scale), beta = _mm512_loadu_ps(shift), f = _mm512_loadu_ps(factor);
  const __m512 mz = _mm512_loadu_ps(mean_dz), mzx = _mm512_loadu_ps(mean_dz_xhat);
  for (int s = 0; s < spatial; ++s) {
    const int j = s * 16;
    const __m512 xh = Load16(xhat + j);
    const __m512 dz = ReachingZ16(LoadBfloat16Values(dy + j), xh, gamma, beta, relu);
    Store16(dx + j, _mm512_mul_ps(f, _mm512_fnmadd_ps(xh, mzx, _mm512_sub_ps(dz, mz))));
  }
}
#endif

// dy, x_hat and dx in floats or bf16 (uint16_t). With x_hat in bf16 the rule computes in bf16: it reads dy rounded to
// bf16 (BatchNormLayer's bf16 rule).
template <typename Dy, typename Xhat, typename Out>
struct Operands {
  const Dy* dy;
  const Xhat* xhat;
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

// dy as the rule reads it: rounded to bf16 where it computes in bf16 (x_hat in bf16), else as it lies.
template <typename Xhat, typename Dy>
CREMA_ALWAYS_INLINE float GradientValue(Dy dy) {
  if constexpr (std::is_same_v<Xhat, uint16_t>) {
    return Bfloat16ValueOf(dy);
  } else {
    return ValueOf(dy);
  }
}

// Channel block k's gradients.
template <int kBlock, typename Dy, typename Xhat, typename Out>
CREMA_ALWAYS_INLINE void BackwardBlock(const ChannelGrid& g, const Operands<Dy, Xhat, Out>& a, int k) {
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
        const Dy* dy = a.dy + offset;
        const Xhat* xhat = a.xhat + offset;
        if constexpr (std::is_same_v<Xhat, uint16_t>) {
          // The bf16 rule: an item's sums in float, four positions apart (position s into sum s % 4: four chains of
          // additions instead of one, whose latency would bound the loop), then added in double in a fixed order.
          constexpr int kChains = 4;
          LaneValues<kBlock == 0 ? 0 : kChains * kBlock, float> part_dz(kChains * b), part_dz_xhat(kChains * b);
          float* pz = part_dz.data();
          float* pzx = part_dz_xhat.data();
          bool summed = false;
          if constexpr (kBlock == 16 && CREMA_BF16_LOOPS) {
            summed = HasBfloat16Conversions();
            if (summed) Bfloat16Sums16(dy, xhat, gamma, beta, a.relu, g.spatial, pz, pzx);
          }
          if (!summed) {  // the loops of every vector width
            int s = 0;
            for (; s + kChains <= g.spatial; s += kChains)
              for (int c = 0; c < kChains; ++c)
                for (int l = 0; l < lanes; ++l) {
                  const int j = (s + c) * lanes + l;
                  const float xh = ValueOf(xhat[j]);
                  const float dz = ReachingZ(GradientValue<Xhat>(dy[j]), xh, gamma[l], beta[l], a.relu);
                  pz[c * lanes + l] += dz;
                  pzx[c * lanes + l] += dz * xh;
                }
            for (; s < g.spatial; ++s)
              for (int l = 0; l < lanes; ++l) {
                const int j = s * lanes + l;
                const float xh = ValueOf(xhat[j]);
                const float dz = ReachingZ(GradientValue<Xhat>(dy[j]), xh, gamma[l], beta[l], a.relu);
                pz[l] += dz;
                pzx[l] += dz * xh;
              }
          }
          for (int c = 0; c < kChains; ++c)
            for (int l = 0; l < lanes; ++l) {
              sz[l] += pz[c * lanes + l];
              szx[l] += pzx[c * lanes + l];
            }
        } else {
          for (int s = 0; s < g.spatial; ++s)
            for (int l = 0; l < lanes; ++l) {
              const int j = s * lanes + l;
              const float xh = ValueOf(xhat[j]);
              const float dz = ReachingZ(GradientValue<Xhat>(dy[j]), xh, gamma[l], beta[l], a.relu);
              sz[l] += dz;
              szx[l] += static_cast<double>(dz) * xh;
            }
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
      const Dy* dy = a.dy + offset;
      const Xhat* xhat = a.xhat + offset;
      Out* dx = a.dx + offset;
      if constexpr (kBlock == 16 && CREMA_BF16_LOOPS && std::is_same_v<Xhat, uint16_t>) {
        if (HasBfloat16Conversions()) {
          Bfloat16Gradient16(dy, xhat, gamma, beta, a.relu, f, mz, mzx, g.spatial, dx);
          continue;
        }
      }
      for (int s = 0; s < g.spatial; ++s)
        for (int l = 0; l < lanes; ++l) {
          const int j = s * lanes + l;
          const float xh = ValueOf(xhat[j]);
          const float dz = ReachingZ(GradientValue<Xhat>(dy[j]), xh, gamma[l], beta[l], a.relu);
          dx[j] = StoredAs(f[l] * (dz - mz[l] - xh * mzx[l]), dx);
        }
    }
  }
}

// Training in bf16 (BatchNormLayer's bf16 rule): channel block k's batch mean and biased variance from x's values
// rounded to bf16, the sums of x and x^2 taken in one pass in double (each square of a bf16 value is exact in double).
template <int kBlock, typename X>
CREMA_ALWAYS_INLINE void StatisticsBlock(const ChannelGrid& g, const X* x, int k, float* mean, float* variance) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  const int lanes = kBlock > 0 ? kBlock : b;
  const size_t plane = static_cast<size_t>(g.spatial) * b;
  LaneValues<kBlock, double> sum(b), sum_squares(b);
  double* s1 = sum.data();
  double* s2 = sum_squares.data();
  for (int n = 0; n < g.num; ++n) {
    const X* p = x + (static_cast<size_t>(n) * blocks + k) * plane;
    for (int s = 0; s < g.spatial; ++s)
      for (int l = 0; l < lanes; ++l) {
        const double v = Bfloat16ValueOf(p[s * lanes + l]);
        s1[l] += v;
        s2[l] += v * v;
      }
  }
  const double m = static_cast<double>(g.num) * g.spatial;
  for (int l = 0; l < lanes; ++l) {
    const double mu = m > 0 ? s1[l] / m : 0.0;
    const double var = m > 0 ? s2[l] / m - mu * mu : 0.0;
    mean[k * b + l] = static_cast<float>(mu);
    variance[k * b + l] = static_cast<float>(var > 0.0 ? var : 0.0);
  }
}

// Item n's channel block k in bf16: x_hat = (x - mean) * inv_std from x rounded to bf16, kept rounded to bf16, and the
// top from that kept value, as AffineForwardLoops writes it.
template <int kBlock, bool kRelu, typename X, typename Y>
CREMA_ALWAYS_INLINE void NormalizePlane(int b, const X* x, const float* mean, const float* inv_std, const float* scale,
                                        const float* shift, uint16_t* xhat, Y* y, int spatial) {
  for (int s = 0; s < spatial; ++s)
    for (int l = 0; l < b; ++l) {
      const int j = s * b + l;
      const uint16_t h = StoredAs((Bfloat16ValueOf(x[j]) - mean[l]) * inv_std[l], xhat);
      xhat[j] = h;
      const float z = scale[l] * ValueOf(h) + shift[l];
      y[j] = StoredAs(kRelu ? Rectified(z) : z, y);
    }
}

template <int kBlock, typename X, typename Y>
CREMA_ALWAYS_INLINE void NormalizeBlock(const ChannelGrid& g, int n, int k, const X* x, const float* mean,
                                        const float* inv_std, const float* gamma, const float* beta, bool relu,
                                        uint16_t* xhat, Y* y) {
  const int b = kBlock > 0 ? kBlock : g.block, blocks = g.channels / b;
  LaneValues<kBlock, float> mu(b), is(b), scale(b), shift(b);
  for (int l = 0; l < b; ++l) {
    mu.data()[l] = mean[k * b + l];
    is.data()[l] = inv_std[k * b + l];
    scale.data()[l] = gamma[k * b + l];
    shift.data()[l] = beta != nullptr ? beta[k * b + l] : 0.f;
  }
  const size_t offset = (static_cast<size_t>(n) * blocks + k) * static_cast<size_t>(g.spatial) * b;
  const int lanes = kBlock > 0 ? kBlock : b;
  if constexpr (kBlock == 16 && CREMA_BF16_LOOPS) {
    if (HasBfloat16Conversions()) {
      const auto plane = relu ? NormalizePlane16<true, X, Y> : NormalizePlane16<false, X, Y>;
      plane(x + offset, mu.data(), is.data(), scale.data(), shift.data(), xhat + offset, y + offset, g.spatial);
      return;
    }
  }
  if (relu) {
    NormalizePlane<kBlock, true>(lanes, x + offset, mu.data(), is.data(), scale.data(), shift.data(), xhat + offset,
                                 y + offset, g.spatial);
  } else {
    NormalizePlane<kBlock, false>(lanes, x + offset, mu.data(), is.data(), scale.data(), shift.data(), xhat + offset,
                                  y + offset, g.spatial);
  }
}

// The per-block bodies, built for each vector width (core/vector_clones.hpp): target_clones takes plain functions, one
// for each block and element types, and the threads' loops call them (a loop of OpenMP's inside such a function, or
// in a template it inlines, would be outlined once, for the baseline only).
#define CREMA_FORWARD_BODIES(SUFFIX, BLOCK, OUT)                                                                      \
  CREMA_VECTOR_CLONES void Forward##SUFFIX(const ChannelGrid& g, int n, int k, const float* xhat, const float* gamma, \
                                           const float* beta, bool relu, OUT* y) {                                    \
    ForwardBlock<BLOCK>(g, n, k, xhat, gamma, beta, relu, y);                                                         \
  }
#define CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, DY, XHAT, OUT)                                                  \
  CREMA_VECTOR_CLONES void Backward##SUFFIX(const ChannelGrid& g, const Operands<DY, XHAT, OUT>& a, int k) { \
    BackwardBlock<BLOCK>(g, a, k);                                                                           \
  }
#define CREMA_BF16_FORWARD_BODIES(SUFFIX, BLOCK, X, Y)                                                               \
  CREMA_VECTOR_CLONES void Normalize##SUFFIX(const ChannelGrid& g, int n, int k, const X* x, const float* mean,      \
                                             const float* inv_std, const float* gamma, const float* beta, bool relu, \
                                             uint16_t* xhat, Y* y) {                                                 \
    NormalizeBlock<BLOCK>(g, n, k, x, mean, inv_std, gamma, beta, relu, xhat, y);                                    \
  }
#define CREMA_STATISTICS_BODIES(SUFFIX, BLOCK, X)                                                                      \
  CREMA_VECTOR_CLONES void Statistics##SUFFIX(const ChannelGrid& g, const X* x, int k, float* mean, float* variance) { \
    StatisticsBlock<BLOCK>(g, x, k, mean, variance);                                                                   \
  }
#define CREMA_ALL_BODIES(SUFFIX, BLOCK)                              \
  CREMA_FORWARD_BODIES(SUFFIX, BLOCK, float)                         \
  CREMA_FORWARD_BODIES(SUFFIX, BLOCK, uint16_t)                      \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, float, float, float)          \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, float, float, uint16_t)       \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, float, uint16_t, float)       \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, float, uint16_t, uint16_t)    \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, uint16_t, uint16_t, float)    \
  CREMA_BACKWARD_BODIES(SUFFIX, BLOCK, uint16_t, uint16_t, uint16_t) \
  CREMA_BF16_FORWARD_BODIES(SUFFIX, BLOCK, float, float)             \
  CREMA_BF16_FORWARD_BODIES(SUFFIX, BLOCK, float, uint16_t)          \
  CREMA_BF16_FORWARD_BODIES(SUFFIX, BLOCK, uint16_t, float)          \
  CREMA_BF16_FORWARD_BODIES(SUFFIX, BLOCK, uint16_t, uint16_t)       \
  CREMA_STATISTICS_BODIES(SUFFIX, BLOCK, float)                      \
  CREMA_STATISTICS_BODIES(SUFFIX, BLOCK, uint16_t)
CREMA_ALL_BODIES(16, 16)
CREMA_ALL_BODIES(8, 8)
CREMA_ALL_BODIES(1, 1)
CREMA_ALL_BODIES(Any, 0)
#undef CREMA_ALL_BODIES
#undef CREMA_STATISTICS_BODIES
#undef CREMA_BF16_FORWARD_BODIES
#undef CREMA_BACKWARD_BODIES
#undef CREMA_FORWARD_BODIES

// The body for a channel block of `block` lanes among the four.
template <typename Body>
Body ForBlock(int block, Body sixteen, Body eight, Body one, Body any) {
  return block == 16 ? sixteen : block == 8 ? eight : block == 1 ? one : any;
}

bool Threaded(const ChannelGrid& g) {
  return static_cast<long long>(g.num) * g.spatial * g.channels >= ParallelElementThreshold();
}

template <typename Dy, typename Xhat, typename Out>
void BackwardInLayout(const ChannelGrid& grid, const Operands<Dy, Xhat, Out>& a) {
  using Body = void (*)(const ChannelGrid&, const Operands<Dy, Xhat, Out>&, int);
  const Body body = ForBlock<Body>(grid.block, Backward16, Backward8, Backward1, BackwardAny);
  const int blocks = grid.channels / grid.block;
#pragma omp parallel for if (Threaded(grid)) schedule(static)
  for (int k = 0; k < blocks; ++k) body(grid, a, k);
}

template <typename Out>
void ForwardInLayout(const ChannelGrid& g, const float* xhat, const float* gamma, const float* beta, bool relu,
                     Out* y) {
  using Body = void (*)(const ChannelGrid&, int, int, const float*, const float*, const float*, bool, Out*);
  const Body body = ForBlock<Body>(g.block, Forward16, Forward8, Forward1, ForwardAny);
  const int blocks = g.channels / g.block;
#pragma omp parallel for collapse(2) if (Threaded(g)) schedule(static)
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

template <typename Dy, typename Xhat, typename Out>
void AffineBackwardLoops(const ChannelGrid& grid, const Dy* dy, const Xhat* xhat, const float* inv_std,
                         const float* gamma, const float* beta, bool relu, bool batch_statistics, Out* dx,
                         float* gamma_diff, float* beta_diff) {
  BackwardInLayout(
      grid, Operands<Dy, Xhat, Out>{dy, xhat, inv_std, gamma, beta, relu, batch_statistics, dx, gamma_diff, beta_diff});
}

template <typename X>
void Bfloat16StatisticsLoops(const ChannelGrid& grid, const X* x, float* mean, float* variance) {
  using Body = void (*)(const ChannelGrid&, const X*, int, float*, float*);
  const Body body = ForBlock<Body>(grid.block, Statistics16, Statistics8, Statistics1, StatisticsAny);
  const int blocks = grid.channels / grid.block;
#pragma omp parallel for if (Threaded(grid)) schedule(static)
  for (int k = 0; k < blocks; ++k) body(grid, x, k, mean, variance);
}

template <typename X, typename Y>
void Bfloat16NormalizeLoops(const ChannelGrid& g, const X* x, const float* mean, const float* inv_std,
                            const float* gamma, const float* beta, bool relu, uint16_t* xhat, Y* y) {
  using Body = void (*)(const ChannelGrid&, int, int, const X*, const float*, const float*, const float*, const float*,
                        bool, uint16_t*, Y*);
  const Body body = ForBlock<Body>(g.block, Normalize16, Normalize8, Normalize1, NormalizeAny);
  const int blocks = g.channels / g.block;
#pragma omp parallel for collapse(2) if (Threaded(g)) schedule(static)
  for (int n = 0; n < g.num; ++n)
    for (int k = 0; k < blocks; ++k) body(g, n, k, x, mean, inv_std, gamma, beta, relu, xhat, y);
}

#define CREMA_BACKWARD_LOOPS(DY, XHAT, OUT)                                                                 \
  template void AffineBackwardLoops(const ChannelGrid&, const DY*, const XHAT*, const float*, const float*, \
                                    const float*, bool, bool, OUT*, float*, float*);
CREMA_BACKWARD_LOOPS(float, float, float)
CREMA_BACKWARD_LOOPS(float, float, uint16_t)
CREMA_BACKWARD_LOOPS(float, uint16_t, float)
CREMA_BACKWARD_LOOPS(float, uint16_t, uint16_t)
CREMA_BACKWARD_LOOPS(uint16_t, uint16_t, float)
CREMA_BACKWARD_LOOPS(uint16_t, uint16_t, uint16_t)
#undef CREMA_BACKWARD_LOOPS
template void Bfloat16StatisticsLoops(const ChannelGrid&, const float*, float*, float*);
template void Bfloat16StatisticsLoops(const ChannelGrid&, const uint16_t*, float*, float*);
#define CREMA_NORMALIZE_LOOPS(X, Y)                                                                            \
  template void Bfloat16NormalizeLoops(const ChannelGrid&, const X*, const float*, const float*, const float*, \
                                       const float*, bool, uint16_t*, Y*);
CREMA_NORMALIZE_LOOPS(float, float)
CREMA_NORMALIZE_LOOPS(float, uint16_t)
CREMA_NORMALIZE_LOOPS(uint16_t, float)
CREMA_NORMALIZE_LOOPS(uint16_t, uint16_t)
#undef CREMA_NORMALIZE_LOOPS

}  // namespace crema
