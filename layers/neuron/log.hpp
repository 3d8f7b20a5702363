// Log: y = log_base(shift + scale * x), element by element (natural log for base -1). One bottom, one top of the
// same shape; may run in place: the backward pass needs the input, so in place the forward pass first copies it
// into an internal blob ("<layer>.input"). Runs on the CPU and the GPU from the same rules (log.cu).
//
// Params (log_param): base (default -1 = e; otherwise positive and not 1), scale (default 1), shift (default 0).
// The input must keep shift + scale * x > 0 (NaN or -inf otherwise, as in Caffe).
// Difference from Caffe: base 1 (a division by ln 1 = 0) is an error naming log_param.base.
#pragma once

#include <cmath>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// inv_log_base = 1 / ln(base), 1 for e.
struct LogForward {
  const float* x;
  float* y;
  float scale, shift, inv_log_base;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = logf(shift + scale * x[i]) * inv_log_base; }
};

// dy/dx = scale / ((shift + scale * x) ln(base)).
struct LogBackward {
  const float* x;
  const float* dy;
  float* dx;
  float scale, shift, inv_log_base;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = dy[i] * scale * inv_log_base / (shift + scale * x[i]); }
};

class LogLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Log"; }
  // Backward reads its input.
  bool BackwardReadsTop(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  float inv_log_base_ = 1.f;
};

}  // namespace crema
