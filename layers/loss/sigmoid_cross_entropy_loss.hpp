// The cross-entropy between sigmoid(scores) and targets in [0, 1], fused with the sigmoid so that both the loss
// and the gradient are stable for scores of any size.
//
// Bottoms: scores x and targets t (the same count; any shapes). Top: the loss (a scalar, loss weight 1 unless
// set).
//
// Per element, -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), computed as max(x, 0) - x t + log(1 +
// exp(-|x|)), summed over the elements whose target is not loss_param.ignore_label and divided by the
// normalizer of loss_param.normalization: FULL = count, VALID = the non-ignored elements, BATCH_SIZE = the
// first axis, NONE = 1 (at least 1). As in Caffe, when neither normalization nor the deprecated normalize is
// set, the layer divides by the batch size (BATCH_SIZE), not VALID; normalize: true means VALID, false
// BATCH_SIZE. Gradient: (sigmoid(x) - t) / normalizer, 0 where ignored; none to the targets.
//
// Params: loss_param (ignore_label, normalization, normalize).
//
// Differences from Caffe: a target outside [0, 1] (or NaN) that is not the ignore_label is an error naming
// the value and its index (Caffe computes a meaningless loss); the ignore_label matches a target equal to it
// as a float (Caffe truncates the target to an integer first, so a soft target 0.5 would match ignore_label 0).
//
// Runs on the CPU and the GPU from the same rules (sigmoid_cross_entropy_loss.cu compiles them): the targets
// are checked on the host (where data layers write them), the per-element terms summed on the context.
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// The targets as the rules see them: which are ignored.
struct SigmoidCrossEntropyTargets {
  const float* t;
  bool has_ignore_label;
  float ignore_label;
  CREMA_HOST_DEVICE bool ignored(int i) const { return has_ignore_label && t[i] == ignore_label; }
};

// term[i] = max(x, 0) - x t + log(1 + exp(-|x|)), 0 where the target is ignored.
struct SigmoidCrossEntropyTermRule {
  SigmoidCrossEntropyTargets targets;
  const float* x;
  float* term;
  CREMA_HOST_DEVICE void operator()(int i) const {
    if (targets.ignored(i)) {
      term[i] = 0.f;
      return;
    }
    const float xi = x[i];
    term[i] = (xi > 0.f ? xi : 0.f) - xi * targets.t[i] + log1pf(expf(-fabsf(xi)));
  }
};

// dx = dloss / normalizer * (sigmoid(x) - t), 0 where ignored; the top's gradient is read on the device.
struct SigmoidCrossEntropyGradientRule {
  SigmoidCrossEntropyTargets targets;
  const float* x;
  const float* loss_diff;
  float normalizer;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const {
    if (targets.ignored(i)) {
      dx[i] = 0.f;
      return;
    }
    // sigmoid(x), written so that exp never overflows.
    const float e = expf(-fabsf(x[i]));
    const float sigmoid = x[i] >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dx[i] = loss_diff[0] / normalizer * (sigmoid - targets.t[i]);
  }
};

class SigmoidCrossEntropyLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  bool ignored(float target) const { return has_ignore_label_ && target == static_cast<float>(ignore_label_); }
  float normalizer(const Blob& scores, int valid) const;
  SigmoidCrossEntropyTargets TargetsOn(const Blob& targets) const;

  LossParameter::NormalizationMode normalization_ = LossParameter::BATCH_SIZE;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  // Non-ignored elements in the last forward pass, for the backward pass's normalizer.
  int valid_count_ = 0;
};

}  // namespace crema
