// ELU: y = x for x > 0, alpha * (exp(x) - 1) otherwise, element by element. One bottom, one top of the same
// shape; may run in place when alpha >= 0. Runs on the CPU and the GPU from the same rules (elu.cu).
//
// Params (elu_param): alpha (default 1).
// Difference from Caffe: the gradient on the negative side is written as y + alpha (= alpha * exp(x)) and the
// side is read from the input, or from the output when in place; for alpha >= 0 the output has the input's side
// of zero, so in place is exact. A negative alpha in place is an error (Caffe silently gives wrong gradients).
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ELUForward {
  const float* x;
  float* y;
  float alpha;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = x[i] > 0.f ? x[i] : alpha * expm1f(x[i]); }
};

// `sign_source` is the input, or the output when in place.
struct ELUBackward {
  const float* sign_source;
  const float* y;
  const float* dy;
  float* dx;
  float alpha;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * (sign_source[i] > 0.f ? 1.f : y[i] + alpha); }
};

class ELULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ELU"; }
  FusedActivation AsFusedActivation() const override { return {FusedActivation::kELU, param_.elu_param().alpha()}; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
