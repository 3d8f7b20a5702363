#include "layers/neuron/fused_activation.hpp"

#include "layers/neuron/clip.hpp"
#include "layers/neuron/elu.hpp"
#include "layers/neuron/relu.hpp"
#include "layers/neuron/sigmoid.hpp"
#include "layers/neuron/tanh.hpp"

namespace crema {

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

}  // namespace crema
