// PReLU: y = max(x, 0) + a_c * min(x, 0), where a_c is a learned slope of the input's channel (axis 1), or one
// slope shared by every channel. One bottom (at least 2-d, channels on axis 1), one top of the same shape; may
// run in place: the backward pass needs the input, so in place the forward pass first copies it into an internal
// blob ("<layer>.input"). Runs on the CPU and the GPU from the same rules (prelu.cu compiles them); the slopes'
// gradient sums per-value terms, written to the workspace, with matrix-vector products (BroadcastSum).
//
// Params (prelu_param): filler (of the slopes; default constant 0.25), channel_shared (default false).
// Parameter blob: the slopes, shape (channels), or (1) when channel_shared. Backward accumulates into their diff.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"
#include "layers/neuron/bias.hpp"

namespace crema {

// Value j takes slope (j / inner) % channels; a shared slope is one channel.
struct PReLUForwardRule {
  const float* x;
  const float* slope;
  float* y;
  int channels, inner;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const float a = slope[j / inner % channels];
    y[j] = x[j] > 0.f ? x[j] : a * x[j];
  }
};

struct PReLUBackwardRule {
  const float* x;
  const float* dy;
  const float* slope;
  float* dx;
  int channels, inner;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const float a = slope[j / inner % channels];
    dx[j] = x[j] > 0.f ? dy[j] : a * dy[j];
  }
};

// The slope gradient's term of value j: dy * x where x <= 0, else 0.
struct PReLUSlopeTermRule {
  const float* x;
  const float* dy;
  float* term;
  CREMA_HOST_DEVICE void operator()(int j) const { term[j] = x[j] <= 0.f ? dy[j] * x[j] : 0.f; }
};

class PReLULayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "PReLU"; }
  // Backward reads its input.
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  void CheckShape(const Blob& bottom) const;
  bool channel_shared_ = false;
  int channels_ = 0;
  // The bottom seen around its slopes: (items, channels, positions), or one slope over every value when shared.
  Broadcast geometry_;
};

}  // namespace crema
