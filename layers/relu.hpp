// ReLU: y = max(x, 0) + negative_slope * min(x, 0), element by element (negative_slope > 0 gives the "leaky"
// form). One bottom, one top of the same shape; may run in place. Runs on the CPU and the GPU from the same
// rules (relu.cu compiles their kernels).
//
// Params (relu_param): negative_slope (default 0; a negative slope cannot run in place, see relu.cpp).
#pragma once

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ReLUForward {
  const float* x;
  float* y;
  float slope;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = x[i] > 0.f ? x[i] : slope * x[i]; }
};

// `sign_source` is the input, or the output when in place (same sign, as the slope is then non-negative).
struct ReLUBackward {
  const float* sign_source;
  const float* dy;
  float* dx;
  float slope;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * (sign_source[i] > 0.f ? 1.f : slope); }
};

class ReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU"; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
