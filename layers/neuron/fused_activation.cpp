#include "layers/neuron/fused_activation.hpp"

#include <cstdint>

#include "core/bf16_vectors.hpp"
#include "core/layout.hpp"
#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"
#include "layers/neuron/clip.hpp"
#include "layers/neuron/elu.hpp"
#include "layers/neuron/relu.hpp"
#include "layers/neuron/sigmoid.hpp"
#include "layers/neuron/tanh.hpp"

namespace crema {

namespace {

#if CREMA_BF16_LOOPS
// The bf16 gradient's gating below in AVX512_BF16's conversions, 16 values a step (the same bits: 0 * g rounded is g's
// signed zero, or g's NaN made quiet, as ToBfloat16 rounds it).
template <typename Y>
CREMA_BF16_TARGET void GateBfloat16Gradient(long long begin, long long end, const Y* y, uint16_t* g) {
  const __m512 zero = _mm512_setzero_ps();
  long long i = begin;
  for (; i + 16 <= end; i += 16) {
    const __mmask16 closed = _mm512_cmp_ps_mask(Load16(y + i), zero, _CMP_NGT_UQ);  // not y > 0
    if (closed == 0) continue;
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i));
    const __m256i gated = Rounded(_mm512_mul_ps(zero, Widened(bits)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + i), _mm256_mask_blend_epi16(closed, bits, gated));
  }
  if (i < end) {
    const __mmask16 lanes = FirstLanes(end - i);
    const __mmask16 closed = _mm512_mask_cmp_ps_mask(lanes, Load16(y + i, lanes), zero, _CMP_NGT_UQ);
    _mm256_mask_storeu_epi16(g + i, closed, Rounded(_mm512_mul_ps(zero, Load16(g + i, lanes))));
  }
}
#endif

// Over the threads, in stretches of whole vectors.
template <typename Y>
void GateBfloat16Gradient(int n, const Y* y, uint16_t* g) {
#if CREMA_BF16_LOOPS
  if (HasBfloat16Conversions()) {
    ForEachStretch(n, n >= ParallelElementThreshold(),
                   [&](long long begin, long long end) { GateBfloat16Gradient(begin, end, y, g); });
    return;
  }
#endif
#pragma omp parallel for if (n >= ParallelElementThreshold()) schedule(static)
  for (int i = 0; i < n; ++i)
    if (!(ValueOf(y[i]) > 0.f)) g[i] = ToBfloat16(0.f * FromBfloat16(g[i]));
}

}  // namespace

void ApplyFusedSum(Context& context, const Blob& summand, Blob* top) {
  CREMA_CHECK(summand.count() == top->count() && summand.layout() == top->layout())
      << "a fused sum adds a blob of shape " << summand.shape_string() << " (" << LayoutName(summand.layout())
      << ") to one of shape " << top->shape_string() << " (" << LayoutName(top->layout()) << ")";
  if (top->count() == 0) return;
  const Device d = context.device();
  axpy(context, top->count(), 1.f, summand.data_on(d), top->mutable_data_on(d));
}

void ApplyFusedActivation(Context& context, const FusedActivation& activation, Blob* top) {
  const int n = top->count();
  if (n == 0) return;
  float* y = top->mutable_data_on(context.device());
  switch (activation.kind) {
    case FusedActivation::kNone:
      return;
    case FusedActivation::kReLU:
      for_each_element(context, n, ReLUForward{y, y, activation.alpha});
      return;
    case FusedActivation::kELU:
      for_each_element(context, n, ELUForward{y, y, activation.alpha});
      return;
    case FusedActivation::kSigmoid:
      for_each_element(context, n, SigmoidForward{y, y});
      return;
    case FusedActivation::kTanH:
      for_each_element(context, n, TanHForward{y, y});
      return;
    case FusedActivation::kClip:
      for_each_element(context, n, ClipForward{y, y, activation.alpha, activation.beta});
      return;
  }
}

void ApplyFusedActivationBackward(Context& context, const FusedActivation& activation, Blob* top) {
  CREMA_CHECK(activation.kind == FusedActivation::kReLU && activation.alpha >= 0.f)
      << "only a ReLU of slope 0 or more runs backward fused, not " << activation.describe();
  const int n = top->count();
  if (n == 0) return;
  const Device d = context.device();
  if (top->diff_type() == ElementType::kBfloat16) {  // the gradient kept in bf16 (planned so, on the host)
    // A slope of 0 only: zeroing commutes with the rounding (0 * g is g's signed zero, or NaN, in either type).
    CREMA_CHECK(activation.alpha == 0.f) << "a bf16 gradient runs backward through a fused ReLU of slope 0 only, not "
                                         << activation.describe();
    auto* g = static_cast<uint16_t*>(top->mutable_cpu_diff_bytes());
    if (top->data_type() == ElementType::kBfloat16)
      GateBfloat16Gradient(n, static_cast<const uint16_t*>(top->cpu_bytes()), g);
    else
      GateBfloat16Gradient(n, top->cpu_data(), g);
    return;
  }
  float* dy = top->mutable_diff_on(d);
  if (IsHalfType(top->data_type())) {
    // The output kept in 16 bits (bf16 from a oneDNN engine; float16 or bf16 from the GPU's half-precision engines). A
    // 16-bit value has its float's sign, and is zero where the float was or where its magnitude lay below what the type
    // rounds away from zero (2^-25 in float16; bf16's rounding takes denormal floats, below 2^-126, as zero): the
    // gradient over floats but there.
    for_each_element(context, n,
                     ReLUBackwardOf<uint16_t>{static_cast<const uint16_t*>(top->bytes_on(d)), dy, dy, activation.alpha,
                                              top->data_type() == ElementType::kBfloat16});
    return;
  }
  for_each_element(context, n, ReLUBackward{top->data_on(d), dy, dy, activation.alpha});
}

}  // namespace crema
