// The per-element rules of the solvers' updates, each written once as a functor that runs on the host
// (OpenMP) and on the GPU (update_rules.cu compiles their kernels): for_each_element(context, n, rule).
// A new update rule (Nesterov, Adam, ...) adds its functor here and one line in update_rules.cu.
#pragma once

#include "core/elementwise.hpp"

namespace crema {

// L2 weight decay: diff += decay * data.
struct L2Decay {
  const float* data;
  float* diff;
  float decay;
  CREMA_HOST_DEVICE void operator()(int i) const { diff[i] += decay * data[i]; }
};

// L1 weight decay: diff += decay * sign(data).
struct L1Decay {
  const float* data;
  float* diff;
  float decay;
  CREMA_HOST_DEVICE void operator()(int i) const {
    diff[i] += decay * static_cast<float>((data[i] > 0.f) - (data[i] < 0.f));
  }
};

// SGD with momentum: velocity = momentum * velocity + rate * diff; the step to subtract (diff) = velocity.
struct SgdMomentum {
  float* velocity;
  float* diff;
  float momentum;
  float rate;
  CREMA_HOST_DEVICE void operator()(int i) const {
    velocity[i] = momentum * velocity[i] + rate * diff[i];
    diff[i] = velocity[i];
  }
};

}  // namespace crema
