// Power: y = (shift + scale * x) ^ power, element by element. One bottom, one top of the same shape; may run in
// place: the backward pass needs the input, so in place the forward pass first copies it into an internal blob
// ("<layer>.input"). Runs on the CPU and the GPU from the same rules (power.cu).
//
// Params (power_param): power (default 1), scale (default 1), shift (default 0). A non-integer power needs
// shift + scale * x >= 0 (powf gives NaN otherwise, as in Caffe).
// Difference from Caffe: the gradient is power * scale * (shift + scale * x) ^ (power - 1) from the input
// (Caffe divides the output by the base, which is NaN where the base is 0, and reads the overwritten input in
// place); it is 0 everywhere when power * scale is 0, as in Caffe.
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct PowerForward {
  const float* x;
  float* y;
  float power, scale, shift;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = powf(shift + scale * x[i], power); }
};

// dy/dx = power * scale * (shift + scale * x) ^ (power - 1).
struct PowerBackward {
  const float* x;
  const float* dy;
  float* dx;
  float power, scale, shift;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float diff_scale = power * scale;
    dx[i] = diff_scale == 0.f ? 0.f : dy[i] * diff_scale * powf(shift + scale * x[i], power - 1.f);
  }
};

class PowerLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Power"; }
  // Backward reads its input.
  bool BackwardReadsTop(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
};

}  // namespace crema
