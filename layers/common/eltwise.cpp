#include "layers/common/eltwise.hpp"

#include <algorithm>

#include "core/bf16_vectors.hpp"
#include "core/blob_elements.hpp"
#include "core/element_type.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"
#ifdef CREMA_USE_ONEDNN
#include "layers/onednn_util.hpp"
#endif

namespace crema {

bool EltwiseLayer::ForwardIsSumOfTwo() const {
  const EltwiseParameter& p = param_.eltwise_param();
  if (p.operation() != EltwiseParameter::SUM || param_.bottom_size() != 2) return false;
  for (float coeff : p.coeff())
    if (coeff != 1.f) return false;
  return true;
}

void EltwiseLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const EltwiseParameter& p = param_.eltwise_param();
  op_ = p.operation();
  if (p.coeff_size() > 0) {
    CREMA_CHECK(p.coeff_size() == static_cast<int>(bottom.size()))
        << describe() << ": eltwise_param.coeff has " << p.coeff_size() << " value(s); give one per bottom ("
        << bottom.size() << ") or none";
    CREMA_CHECK(op_ != EltwiseParameter::PROD)
        << describe() << ": eltwise_param.coeff is only for operation SUM, but the operation is PROD";
  }
  coeffs_.assign(bottom.size(), 1.f);
  for (int i = 0; i < p.coeff_size(); ++i) coeffs_[i] = p.coeff(i);
  if (op_ == EltwiseParameter::MAX && argmax_ == nullptr)
    argmax_ = AddInternalBlob("argmax", InternalLifetime::kUntilBackward);
}

void EltwiseLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t i = 1; i < bottom.size(); ++i) {
    CREMA_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << describe() << ": bottom " << i << " has shape " << bottom[i]->shape_string() << ", but bottom 0 has "
        << bottom[0]->shape_string() << "; every bottom must have the same shape";
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (argmax_ != nullptr) argmax_->ReshapeLike(*bottom[0]);
}

namespace {

// A residual sum and the ReLU after it, out = ReLU(c0 x0 + c1 x1), over buffers that never overlap (the layer does
// not run in place, nor does the memory plan run it so: AllowsInPlace): a loop each vector width vectorizes.
CREMA_VECTOR_CLONES void SumTwoReLU(const float* __restrict x0, const float* __restrict x1, float* __restrict out,
                                    long long count, float c0, float c1, float slope, bool threaded) {
#pragma omp parallel for if (threaded) schedule(static)
  for (long long k = 0; k < count; ++k) {
    const float value = c0 * x0[k] + c1 * x1[k];
    out[k] = value > 0.f ? value : slope * value;
  }
}

// The same over bf16 operands into a bf16 output (a ResNet unit's sum in bf16 training, planned so): each operand the
// float it stands for, the sum and the ReLU in float, rounded once.
CREMA_VECTOR_CLONES void SumTwoReLUBfloat16(const uint16_t* __restrict x0, const uint16_t* __restrict x1,
                                            uint16_t* __restrict out, long long count, float c0, float c1, float slope,
                                            bool threaded) {
#pragma omp parallel for if (threaded) schedule(static)
  for (long long k = 0; k < count; ++k) {
    const float value = c0 * FromBfloat16(x0[k]) + c1 * FromBfloat16(x1[k]);
    out[k] = StoredAs(value > 0.f ? value : slope * value, out);
  }
}

#if CREMA_BF16_LOOPS
// SumTwoReLUBfloat16 over [begin, end) in AVX512_BF16's conversions (core/bf16_vectors.hpp), where the CPU has them:
// each product rounded to float, then their sum (as the element-by-element loop of SumReLUForward adds them; the loop
// above, built from C++, may fuse a product into the sum: with a residual sum's coefficients of 1 the two agree).
CREMA_BF16_TARGET void SumTwoReLUBfloat16Range(const uint16_t* x0, const uint16_t* x1, uint16_t* out, long long begin,
                                               long long end, float c0, float c1, float slope) {
  const __m512 a = _mm512_set1_ps(c0), b = _mm512_set1_ps(c1), s = _mm512_set1_ps(slope);
  const auto step = [&](long long k, __mmask16 lanes) CREMA_BF16_TARGET {
    const __m512 value =
        _mm512_add_ps(_mm512_mul_ps(a, Load16(x0 + k, lanes)), _mm512_mul_ps(b, Load16(x1 + k, lanes)));
    Store16(out + k, Leaky16(value, s), lanes);
  };
  long long k = begin;
  for (; k + 16 <= end; k += 16) step(k, 0xffff);
  if (k < end) step(k, FirstLanes(end - k));
}
#endif

// SumTwoReLUBfloat16, in AVX512_BF16's conversions where the CPU has them.
void SumTwoReLUBfloat16Rounded(const uint16_t* x0, const uint16_t* x1, uint16_t* out, long long count, float c0,
                               float c1, float slope, bool threaded) {
#if CREMA_BF16_LOOPS
  if (HasBfloat16Conversions()) {
    ForEachStretch(count, threaded, [&](long long begin, long long end) {
      SumTwoReLUBfloat16Range(x0, x1, out, begin, end, c0, c1, slope);
    });
    return;
  }
#endif
  SumTwoReLUBfloat16(x0, x1, out, count, c0, c1, slope, threaded);
}

// Its two gradients: the ReLU's rule on the output's sign, times each coefficient.
CREMA_VECTOR_CLONES void SumTwoReLUBackward(const float* __restrict out, const float* __restrict g,
                                            float* __restrict dx0, float* __restrict dx1, long long count, float c0,
                                            float c1, float slope, bool threaded) {
#pragma omp parallel for if (threaded) schedule(static)
  for (long long k = 0; k < count; ++k) {
    const float passed = out[k] > 0.f ? g[k] : slope * g[k];
    dx0[k] = c0 * passed;
    dx1[k] = c1 * passed;
  }
}

// Element k of a bf16 sum's operand: as it lies in bf16, or rounded from floats.
float Bfloat16Operand(const Blob& blob, long long k) {
  return blob.data_type() == ElementType::kBfloat16 ? FromBfloat16(static_cast<const uint16_t*>(blob.cpu_bytes())[k])
                                                    : FromBfloat16(ToBfloat16(blob.cpu_data()[k]));
}

// The bf16 rule's two gradients over [begin, end): the output's gradient g rounded to bf16, passed where the output
// (any type) is positive, times each coefficient, stored in each gradient's type. Built for each vector width, one
// body per combination of types; the threads' loop calls them (SumTwoReLUBackwardRounded).
#define CREMA_ROUNDED_BACKWARD(Y, G, D0, D1)                                                                           \
  CREMA_VECTOR_CLONES void SumTwoReLUBackwardRange(const Y* __restrict out, const G* __restrict g, D0* __restrict dx0, \
                                                   D1* __restrict dx1, long long begin, long long end, float c0,       \
                                                   float c1, float slope) {                                            \
    for (long long k = begin; k < end; ++k) {                                                                          \
      const float rounded = Bfloat16ValueOf(g[k]);                                                                     \
      const float passed = ValueOf(out[k]) > 0.f ? rounded : slope * rounded;                                          \
      dx0[k] = StoredAs(c0 * passed, dx0);                                                                             \
      dx1[k] = StoredAs(c1 * passed, dx1);                                                                             \
    }                                                                                                                  \
  }
#define CREMA_ROUNDED_BACKWARD_OUTPUTS(Y, G)       \
  CREMA_ROUNDED_BACKWARD(Y, G, uint16_t, uint16_t) \
  CREMA_ROUNDED_BACKWARD(Y, G, uint16_t, float)    \
  CREMA_ROUNDED_BACKWARD(Y, G, float, uint16_t)    \
  CREMA_ROUNDED_BACKWARD(Y, G, float, float)
CREMA_ROUNDED_BACKWARD_OUTPUTS(uint16_t, uint16_t)
CREMA_ROUNDED_BACKWARD_OUTPUTS(uint16_t, float)
CREMA_ROUNDED_BACKWARD_OUTPUTS(float, uint16_t)
CREMA_ROUNDED_BACKWARD_OUTPUTS(float, float)
#undef CREMA_ROUNDED_BACKWARD_OUTPUTS
#undef CREMA_ROUNDED_BACKWARD

#if CREMA_BF16_LOOPS
// SumTwoReLUBackwardRange in AVX512_BF16's conversions, where the CPU has them.
template <typename Y, typename G, typename D0, typename D1>
CREMA_BF16_TARGET void SumTwoReLUBackwardRange16(const Y* out, const G* g, D0* dx0, D1* dx1, long long begin,
                                                 long long end, float c0, float c1, float slope) {
  const __m512 a = _mm512_set1_ps(c0), b = _mm512_set1_ps(c1), s = _mm512_set1_ps(slope);
  const auto step = [&](long long k, __mmask16 lanes) CREMA_BF16_TARGET {
    const __m512 rounded = LoadBfloat16Values(g + k, lanes);
    const __mmask16 positive = _mm512_cmp_ps_mask(Load16(out + k, lanes), _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 passed = _mm512_mask_blend_ps(positive, _mm512_mul_ps(s, rounded), rounded);
    Store16(dx0 + k, _mm512_mul_ps(a, passed), lanes);
    Store16(dx1 + k, _mm512_mul_ps(b, passed), lanes);
  };
  long long k = begin;
  for (; k + 16 <= end; k += 16) step(k, 0xffff);
  if (k < end) step(k, FirstLanes(end - k));
}
#endif

template <typename Y, typename G, typename D0, typename D1>
void SumTwoReLUBackwardRounded(const Y* out, const G* g, D0* dx0, D1* dx1, long long count, float c0, float c1,
                               float slope, bool threaded) {
#if CREMA_BF16_LOOPS
  if (HasBfloat16Conversions()) {
    ForEachStretch(count, threaded, [&](long long begin, long long end) {
      SumTwoReLUBackwardRange16(out, g, dx0, dx1, begin, end, c0, c1, slope);
    });
    return;
  }
#endif
  ForEachStretch(count, threaded, [&](long long begin, long long end) {
    SumTwoReLUBackwardRange(out, g, dx0, dx1, begin, end, c0, c1, slope);
  });
}

}  // namespace

bool EltwiseLayer::SumsInBfloat16() const {
#ifdef CREMA_USE_ONEDNN
  // Where the convolutions around it compute in bf16 (elsewhere they compute in float32, and so does the sum).
  return relu_fused_ && op_ == EltwiseParameter::SUM && requested_precision() == Precision::kBfloat16 &&
         onednn::HasBfloat16Kernels() && !RunsGpuCode();
#else
  return false;
#endif
}

bool EltwiseLayer::SumsInHalf() const {
  return relu_fused_ && op_ == EltwiseParameter::SUM && param_.bottom_size() <= kEltwiseGroup &&
         GpuCodePrecision() != Precision::kFloat32;
}

Quantization EltwiseLayer::ReadsQuantized(int) const {
  if (SumsInHalf()) return HalfInput(true);
  return SumsInBfloat16() ? Quantization{ElementType::kBfloat16, 1.f} : Quantization{};
}

bool EltwiseLayer::WritesQuantized(int, ElementType type) const {
  if (SumsInHalf()) return type == HalfElementType(GpuCodePrecision());
  return type == ElementType::kBfloat16 && SumsInBfloat16();
}

void EltwiseLayer::AbsorbReLU(float slope) {
  CREMA_CHECK(op_ == EltwiseParameter::SUM && slope >= 0.f)
      << describe() << ": a ReLU fuses into a SUM only, with a slope of at least 0 (the output's sign is its input's)";
  relu_fused_ = true;
  relu_slope_ = slope;
}

void EltwiseLayer::SumReLUForward(const std::vector<Blob*>& bottom, Blob* top) const {
  for (const Blob* b : bottom)
    CREMA_CHECK(b->layout() == top->layout())
        << describe() << ": with a ReLU fused, every bottom must be in the top's layout (" << LayoutName(top->layout())
        << "), not " << LayoutName(b->layout());
  const long long count = top->count();
  const bool threaded = count >= ParallelElementThreshold();
  if (SumsInBfloat16()) {
    // The operands rounded to bf16 (as they lie, or from floats), the sum in float; a bf16 top rounds it.
    const bool bf16_top = top->data_type() == ElementType::kBfloat16;
    if (bottom.size() == 2 && bf16_top && bottom[0]->data_type() == ElementType::kBfloat16 &&
        bottom[1]->data_type() == ElementType::kBfloat16) {
      SumTwoReLUBfloat16Rounded(
          static_cast<const uint16_t*>(bottom[0]->cpu_bytes()), static_cast<const uint16_t*>(bottom[1]->cpu_bytes()),
          static_cast<uint16_t*>(top->mutable_cpu_bytes()), count, coeffs_[0], coeffs_[1], relu_slope_, threaded);
      return;
    }
    auto* y16 = bf16_top ? static_cast<uint16_t*>(top->mutable_cpu_bytes()) : nullptr;
    float* y = bf16_top ? nullptr : top->mutable_cpu_data();
#pragma omp parallel for if (threaded) schedule(static)
    for (long long k = 0; k < count; ++k) {
      float value = coeffs_[0] * Bfloat16Operand(*bottom[0], k);
      for (size_t b = 1; b < bottom.size(); ++b) value += coeffs_[b] * Bfloat16Operand(*bottom[b], k);
      value = value > 0.f ? value : relu_slope_ * value;
      if (bf16_top)
        y16[k] = ToBfloat16(value);
      else
        y[k] = value;
    }
    return;
  }
  float* y = top->mutable_cpu_data();
  std::vector<const float*> x;
  for (const Blob* b : bottom) x.push_back(b->cpu_data());
  const float slope = relu_slope_;
  const int bottoms = static_cast<int>(x.size());
  // A residual sum (SumTwoReLU).
  if (bottoms == 2 && y != x[0] && y != x[1]) {
    SumTwoReLU(x[0], x[1], y, count, coeffs_[0], coeffs_[1], slope, threaded);
    return;
  }
  // In bottom order, as the separate SUM adds them.
#pragma omp parallel for if (threaded) schedule(static)
  for (long long k = 0; k < count; ++k) {
    float value = coeffs_[0] * x[0][k];
    for (int b = 1; b < bottoms; ++b) value += coeffs_[b] * x[b][k];
    y[k] = value > 0.f ? value : slope * value;
  }
}

void EltwiseLayer::SumReLUBackward(const Blob& top, const std::vector<bool>& propagate_down,
                                   const std::vector<Blob*>& bottom) const {
  const long long count = top.count();
  if (SumsInBfloat16()) return RoundedSumReLUBackward(top, propagate_down, bottom);
  const float* y = top.cpu_data();
  const float* dy = top.cpu_diff();
  std::vector<float*> dx;
  std::vector<float> coeffs;
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (!propagate_down[b]) continue;
    dx.push_back(bottom[b]->mutable_cpu_diff());
    coeffs.push_back(coeffs_[b]);
  }
  const float slope = relu_slope_;
  const int wanted = static_cast<int>(dx.size());
  if (wanted == 0) return;
  const bool threaded = count >= ParallelElementThreshold();
  // A residual sum's two gradients (SumTwoReLUBackward).
  if (wanted == 2 && dx[0] != dx[1] && dx[0] != dy && dx[1] != dy && dx[0] != y && dx[1] != y) {
    SumTwoReLUBackward(y, dy, dx[0], dx[1], count, coeffs[0], coeffs[1], slope, threaded);
    return;
  }
#pragma omp parallel for if (threaded) schedule(static)
  for (long long k = 0; k < count; ++k) {
    const float g = y[k] > 0.f ? dy[k] : slope * dy[k];  // ReLU's rule in place: the output's sign
    for (int b = 0; b < wanted; ++b) dx[b][k] = coeffs[b] * g;
  }
}

void EltwiseLayer::RoundedSumReLUBackward(const Blob& top, const std::vector<bool>& propagate_down,
                                          const std::vector<Blob*>& bottom) const {
  const long long count = top.count();
  const bool threaded = count >= ParallelElementThreshold();
  if (bottom.size() == 2 && propagate_down[0] && propagate_down[1] && bottom[0] != bottom[1] && bottom[0] != &top &&
      bottom[1] != &top) {  // a residual sum's two gradients
    return WithData(top, [&](const auto* y) {
      WithDiff(top, [&](const auto* g) {
        WithMutableDiff(bottom[0], [&](auto* dx0) {
          WithMutableDiff(bottom[1], [&](auto* dx1) {
            SumTwoReLUBackwardRounded(y, g, dx0, dx1, count, coeffs_[0], coeffs_[1], relu_slope_, threaded);
          });
        });
      });
    });
  }
  // Any other number of gradients asked for: element by element.
  std::vector<float> passed(count);
  WithData(top, [&](const auto* y) {
    WithDiff(top, [&](const auto* g) {
      for (long long k = 0; k < count; ++k) {
        const float rounded = Bfloat16ValueOf(g[k]);
        passed[k] = ValueOf(y[k]) > 0.f ? rounded : relu_slope_ * rounded;
      }
    });
  });
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (!propagate_down[b]) continue;
    WithMutableDiff(bottom[b], [&](auto* dx) {
      for (long long k = 0; k < count; ++k) dx[k] = StoredAs(coeffs_[b] * passed[k], dx);
    });
  }
}

void EltwiseLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (relu_fused_) return SumReLUForward(bottom, top[0]);
  const int count = top[0]->count();
  float* y = top[0]->mutable_cpu_data();
  const float* x0 = bottom[0]->cpu_data();
  switch (op_) {
    case EltwiseParameter::SUM:
      for (int k = 0; k < count; ++k) y[k] = coeffs_[0] * x0[k];
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        const float c = coeffs_[i];
        for (int k = 0; k < count; ++k) y[k] += c * x[k];
      }
      break;
    case EltwiseParameter::PROD:
      for (int k = 0; k < count; ++k) y[k] = x0[k];
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        for (int k = 0; k < count; ++k) y[k] *= x[k];
      }
      break;
    case EltwiseParameter::MAX: {
      float* winner = argmax_->mutable_cpu_data();
      for (int k = 0; k < count; ++k) {
        y[k] = x0[k];
        winner[k] = 0.f;
      }
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        for (int k = 0; k < count; ++k) {
          if (x[k] > y[k]) {  // strictly greater: a tie stays with the earlier bottom
            y[k] = x[k];
            winner[k] = static_cast<float>(i);
          }
        }
      }
      break;
    }
  }
}

void EltwiseLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (relu_fused_) return SumReLUBackward(*top[0], propagate_down, bottom);
  const int count = top[0]->count();
  const float* dy = top[0]->cpu_diff();
  const float* y = top[0]->cpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_cpu_diff();
    switch (op_) {
      case EltwiseParameter::SUM:
        for (int k = 0; k < count; ++k) dx[k] = coeffs_[i] * dy[k];
        break;
      case EltwiseParameter::PROD:
        if (param_.eltwise_param().stable_prod_grad()) {
          for (int k = 0; k < count; ++k) dx[k] = dy[k];
          for (size_t j = 0; j < bottom.size(); ++j) {
            if (j == i) continue;
            const float* x = bottom[j]->cpu_data();
            for (int k = 0; k < count; ++k) dx[k] *= x[k];
          }
        } else {
          const float* x = bottom[i]->cpu_data();
          for (int k = 0; k < count; ++k) dx[k] = dy[k] * y[k] / x[k];
        }
        break;
      case EltwiseParameter::MAX: {
        const float* winner = argmax_->cpu_data();
        const float me = static_cast<float>(i);
        for (int k = 0; k < count; ++k) dx[k] = winner[k] == me ? dy[k] : 0.f;
        break;
      }
    }
  }
}

void EltwiseLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int count = top[0]->count();
  const int bottoms = static_cast<int>(bottom.size());
  if (SumsInHalf()) {
    const bool bfloat16 = GpuCodePrecision() == Precision::kBfloat16;
    EltwiseHalfSumRule rule{};
    rule.bottoms = bottoms;
    for (int b = 0; b < bottoms; ++b) {
      rule.x_half[b] = BottomIsHalf(*bottom[b], b, true);
      rule.x[b] = rule.x_half[b] ? bottom[b]->bytes_on(d) : bottom[b]->data_on(d);
      rule.coeff[b] = coeffs_[b];
    }
    rule.y_half = IsHalfType(top[0]->data_type());
    rule.y = rule.y_half ? top[0]->mutable_bytes_on(d) : top[0]->mutable_data_on(d);
    rule.bfloat16 = bfloat16;
    rule.slope = relu_slope_;
    for_each_element(context(), count, rule);
    return;
  }
  EltwiseForwardRule rule{};
  rule.op = op_;
  rule.y = top[0]->mutable_data_on(d);
  rule.winner = op_ == EltwiseParameter::MAX ? argmax_->mutable_data_on(d) : nullptr;
  for (int first = 0; first < bottoms; first += kEltwiseGroup) {
    rule.first = first;
    rule.onto = first > 0;
    rule.bottoms = std::min(kEltwiseGroup, bottoms - first);
    for (int b = 0; b < rule.bottoms; ++b) {
      rule.x[b] = bottom[first + b]->data_on(d);
      rule.coeff[b] = coeffs_[first + b];
    }
    rule.rectify = relu_fused_ && first + rule.bottoms == bottoms;  // a fused ReLU, after the last group
    rule.slope = relu_slope_;
    for_each_element(context(), count, rule);
  }
}

void EltwiseLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  const Device d = device();
  const int count = top[0]->count();
  const float* dy = top[0]->diff_on(d);
  const bool stable_product = op_ == EltwiseParameter::PROD && param_.eltwise_param().stable_prod_grad();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_diff_on(d);
    if (!stable_product) {
      const bool product = op_ == EltwiseParameter::PROD, max = op_ == EltwiseParameter::MAX;
      // A fused ReLU reads the output's sign, from its 16 bits where it lies so (SumsInHalf).
      const bool y16 = relu_fused_ && IsHalfType(top[0]->data_type());
      for_each_element(context(), count,
                       EltwiseBackwardRule{op_, coeffs_[i], static_cast<float>(i), dy,
                                           product || (relu_fused_ && !y16) ? top[0]->data_on(d) : nullptr,
                                           product ? bottom[i]->data_on(d) : nullptr,
                                           max ? argmax_->data_on(d) : nullptr, dx, relu_fused_, relu_slope_,
                                           y16 ? static_cast<const uint16_t*>(top[0]->bytes_on(d)) : nullptr,
                                           top[0]->data_type() == ElementType::kBfloat16});
      continue;
    }
    std::vector<const float*> others;
    for (size_t j = 0; j < bottom.size(); ++j)
      if (j != i) others.push_back(bottom[j]->data_on(d));
    EltwiseProductGradientRule rule{0, {}, dy, dx};
    for (size_t first = 0; first < others.size(); first += kEltwiseGroup) {
      rule.others = static_cast<int>(std::min(others.size() - first, static_cast<size_t>(kEltwiseGroup)));
      for (int b = 0; b < rule.others; ++b) rule.x[b] = others[first + b];
      rule.from = first == 0 ? dy : dx;
      for_each_element(context(), count, rule);
    }
  }
}

}  // namespace crema
