// Threshold: y = 1 where x > threshold, else 0, element by element. One bottom, one top of the same shape; may
// run in place. Runs on the CPU and the GPU from the same rule (threshold.cu).
//
// Params (threshold_param): threshold (default 0).
// No backward pass, as in Caffe: asking for the bottom's gradient is an error naming the layer.
#pragma once

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ThresholdForward {
  const float* x;
  float* y;
  float threshold;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = x[i] > threshold ? 1.f : 0.f; }
};

class ThresholdLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Threshold"; }
  // Backward reads neither its input nor its output.
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
