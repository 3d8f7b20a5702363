// AbsVal: y = |x|, element by element. One bottom, one top of the same shape; not in place (as in Caffe: the
// backward pass needs the sign of the input). Runs on the CPU and the GPU from the same rules (abs_val.cu).
//
// Params: none. The gradient at x = 0 is 0.
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct AbsValForward {
  const float* x;
  float* y;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = fabsf(x[i]); }
};

// dy/dx = sign(x), 0 at 0.
struct AbsValBackward {
  const float* x;
  const float* dy;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = x[i] > 0.f ? dy[i] : (x[i] < 0.f ? -dy[i] : 0.f); }
};

class AbsValLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "AbsVal"; }
  // Backward reads its input.
  bool BackwardReadsTop(int) const override { return false; }
  bool AllowsInPlace() const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
