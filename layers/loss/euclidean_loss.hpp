// The Euclidean (sum of squares) loss between two blobs of one size: loss = 1/(2N) * sum_n ||a_n - b_n||^2,
// N the size of the first axis (the batch).
//
// Bottoms: a and b (the same first axis and the same count per item; the shapes may otherwise differ, as in
// Caffe). Top: the loss (a scalar, loss weight 1 unless set). No parameters beyond loss_weight.
//
// Both bottoms are differentiable: dloss/da = (a - b) / N and dloss/db = -(a - b) / N (times the top's
// gradient), so either may be a prediction and the other a target. The difference a - b is kept from forward
// to backward in an internal blob (`<layer>.difference`). Same as Caffe.
// Runs on the CPU and the GPU from the same code: rules for the difference and the gradients (euclidean_loss.cu
// compiles them), the sum of squares a dot product on the context.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// difference = a - b.
struct EuclideanDifferenceRule {
  const float* a;
  const float* b;
  float* difference;
  CREMA_HOST_DEVICE void operator()(int i) const { difference[i] = a[i] - b[i]; }
};

// dx = sign * dloss / batch * difference; the top's gradient is read where it lies, so the device never waits for
// the host.
struct EuclideanGradientRule {
  const float* difference;
  const float* loss_diff;
  float sign, batch;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const { dx[i] = sign * loss_diff[0] / batch * difference[i]; }
};

class EuclideanLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "EuclideanLoss"; }
  // Backward reads the difference kept from forward (an internal blob), no bottom and no top.
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  // Either bottom may receive a gradient.
  bool AllowForceBackward(int) const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* difference_ = nullptr;
};

}  // namespace crema
