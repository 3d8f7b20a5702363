// TanH: y = tanh(x), element by element. One bottom, one top of the same shape; may run in place (the backward
// pass needs only the output). Runs on the CPU and the GPU from the same rules (tanh.cu).
//
// Params: none (tanh_param.engine: CUDNN asks for the cudnn engine, layers/neuron/cudnn_activation.hpp, where the GPU
// has it; CAFFE for this one).
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct TanHForward {
  const float* x;
  float* y;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = tanhf(x[i]); }
};

// dy/dx = 1 - y^2.
struct TanHBackward {
  const float* y;
  const float* dy;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * (1.f - y[i] * y[i]); }
};

class TanHLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "TanH"; }
  FusedActivation AsFusedActivation() const override { return {FusedActivation::kTanH}; }
  // Backward reads its output.
  bool BackwardReadsBottom(int) const override { return false; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
