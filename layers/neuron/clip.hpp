// Clip: y = min(max(x, min), max), element by element. One bottom, one top of the same shape; may run in place:
// the backward pass needs the input, so in place the forward pass first copies it into an internal blob
// ("<layer>.input"). Runs on the CPU and the GPU from the same rules (clip.cu).
//
// Params (clip_param): min and max, both required, min <= max. The gradient passes where min <= x <= max (both
// ends included, as in Caffe) and is 0 elsewhere.
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ClipForward {
  const float* x;
  float* y;
  float lo, hi;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = fminf(fmaxf(x[i], lo), hi); }
};

struct ClipBackward {
  const float* x;
  const float* dy;
  float* dx;
  float lo, hi;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.f; }
};

class ClipLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Clip"; }
  FusedActivation AsFusedActivation() const override {
    return {FusedActivation::kClip, param_.clip_param().min(), param_.clip_param().max()};
  }
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
