#include "layers/neuron/fused_activation.hpp"

#include <cstdint>

#include "core/layout.hpp"
#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "layers/neuron/clip.hpp"
#include "layers/neuron/elu.hpp"
#include "layers/neuron/relu.hpp"
#include "layers/neuron/sigmoid.hpp"
#include "layers/neuron/tanh.hpp"

namespace crema {

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
    const bool bf16_output = top->data_type() == ElementType::kBfloat16;
    const auto* y16 = bf16_output ? static_cast<const uint16_t*>(top->cpu_bytes()) : nullptr;
    const float* y = bf16_output ? nullptr : top->cpu_data();
#pragma omp parallel for if (n >= ParallelElementThreshold()) schedule(static)
    for (int i = 0; i < n; ++i)
      if (!((bf16_output ? FromBfloat16(y16[i]) : y[i]) > 0.f)) g[i] = ToBfloat16(0.f * FromBfloat16(g[i]));
    return;
  }
  float* dy = top->mutable_diff_on(d);
  if (top->data_type() == ElementType::kBfloat16) {  // the output kept in bf16 (a oneDNN engine's, on the host)
    // A bf16 value has its float's sign, and is 0 only where the float was: the same gradient as over floats.
    const auto* y = static_cast<const uint16_t*>(top->cpu_bytes());
    const float slope = activation.alpha;
#pragma omp parallel for if (n >= ParallelElementThreshold()) schedule(static)
    for (int i = 0; i < n; ++i) dy[i] = FromBfloat16(y[i]) > 0.f ? dy[i] : slope * dy[i];
    return;
  }
  for_each_element(context, n, ReLUBackward{top->data_on(d), dy, dy, activation.alpha});
}

}  // namespace crema
