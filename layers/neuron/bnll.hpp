// BNLL (binomial normal log likelihood, softplus): y = log(1 + exp(x)), element by element, computed as
// max(x, 0) + log1p(exp(-|x|)) so that it neither overflows for large x nor loses precision for very negative x.
// One bottom, one top of the same shape; may run in place. Runs on the CPU and the GPU from the same rules
// (bnll.cu).
//
// Params: none. Difference from Caffe: the gradient sigmoid(x) is computed from the output as
// 1 - exp(-y) (= sigmoid(x) exactly), so in place gives the true gradient (Caffe reads the overwritten input);
// Caffe also clamps x at 50 inside the gradient, which changes nothing in float.
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct BNLLForward {
  const float* x;
  float* y;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = fmaxf(x[i], 0.f) + log1pf(expf(-fabsf(x[i]))); }
};

// dy/dx = sigmoid(x) = 1 - exp(-y), written with expm1 for precision where y is tiny.
struct BNLLBackward {
  const float* y;
  const float* dy;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = -dy[i] * expm1f(-y[i]); }
};

class BNLLLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "BNLL"; }
  // Backward reads its output.
  bool BackwardReadsBottom(int) const override { return false; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
