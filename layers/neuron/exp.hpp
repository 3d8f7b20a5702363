// Exp: y = base ^ (shift + scale * x), element by element, computed as outer * exp(inner * x) with
// inner = scale * ln(base) and outer = base ^ shift (ln(base) = 1 for base -1, Euler's e). One bottom, one top of
// the same shape; may run in place (the backward pass needs only the output). Runs on the CPU and the GPU from
// the same rules (exp.cu).
//
// Params (exp_param): base (default -1 = e; otherwise > 0), scale (default 1), shift (default 0).
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ExpForward {
  const float* x;
  float* y;
  float inner, outer;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = outer * expf(inner * x[i]); }
};

// dy/dx = inner * y.
struct ExpBackward {
  const float* y;
  const float* dy;
  float* dx;
  float inner;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * y[i] * inner; }
};

class ExpLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Exp"; }
  // Backward reads its output.
  bool BackwardReadsBottom(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  float inner_ = 1.f, outer_ = 1.f;
};

}  // namespace crema
