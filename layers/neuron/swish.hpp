// Swish: y = x * sigmoid(beta * x), element by element. One bottom, one top of the same shape; may run in place:
// the forward pass keeps sigmoid(beta * x) in an internal blob ("<layer>.sigmoid"), and the backward pass needs
// only it and the output. Runs on the CPU and the GPU from the same rules (swish.cu).
//
// Params (swish_param): beta (default 1).
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct SwishForward {
  const float* x;
  float* s;
  float* y;
  float beta;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float v = x[i];
    s[i] = 1.f / (1.f + expf(-beta * v));
    y[i] = v * s[i];
  }
};

// dy/dx = s + beta * x * s * (1 - s) = beta * y + s * (1 - beta * y).
struct SwishBackward {
  const float* y;
  const float* s;
  const float* dy;
  float* dx;
  float beta;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * (beta * y[i] + s[i] * (1.f - beta * y[i])); }
};

class SwishLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Swish"; }
  // Backward reads its output.
  bool BackwardReadsBottom(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  Blob* sigmoid_ = nullptr;
};

}  // namespace crema
