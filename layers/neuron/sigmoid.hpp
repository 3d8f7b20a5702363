// Sigmoid: y = 1 / (1 + exp(-x)), element by element. One bottom, one top of the same shape; may run in place
// (the backward pass needs only the output). Runs on the CPU and the GPU from the same rules (sigmoid.cu).
//
// Params: none (sigmoid_param.engine: CUDNN asks for the cudnn engine, layers/neuron/cudnn_activation.hpp, where the
// GPU has it; CAFFE for this one).
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// exp(-x) overflows to infinity for very negative x, which gives y = 0 as it should.
struct SigmoidForward {
  const float* x;
  float* y;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = 1.f / (1.f + expf(-x[i])); }
};

// dy/dx = y (1 - y).
struct SigmoidBackward {
  const float* y;
  const float* dy;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * y[i] * (1.f - y[i]); }
};

class SigmoidLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Sigmoid"; }
  FusedActivation AsFusedActivation() const override { return {FusedActivation::kSigmoid}; }
  // Backward reads its output.
  bool BackwardReadsBottom(int) const override { return false; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
