// Softmax followed by the multinomial logistic loss, fused so that the gradient is the simple and stable
// p - onehot(label) rather than a chain through the softmax Jacobian.
//
// Bottoms: scores (outer x C x inner, C along softmax_param.axis, default 1) and labels (outer x inner values,
// integers stored as floats, in [0, C) or equal to ignore_label). Tops: the loss (a scalar), and optionally
// the probabilities (the scores' shape; not a loss, weight 0 unless set).
//
// loss = -sum over non-ignored positions of log(max(p[label], FLT_MIN)) / normalizer, where the normalizer
// (at least 1) follows loss_param.normalization: FULL = every position, VALID = the non-ignored positions
// (default), BATCH_SIZE = outer, NONE = 1. The deprecated loss_param.normalize, used only when normalization
// is not set, means VALID when true and BATCH_SIZE when false.
//
// Params: softmax_param (axis), loss_param (ignore_label, normalization, normalize). No gradient flows to the
// labels.
#pragma once

#include <cfloat>
#include <cmath>
#include <memory>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/common/softmax.hpp"
#include "layers/layer.hpp"

namespace crema {

// The rules of both devices (softmax_with_loss.cu compiles their kernels), one position (outer n, inner j)
// each. Labels were checked on the host before they run.
struct SoftmaxLossLabels {
  const float* labels;
  int classes, inner;
  bool has_ignore_label;
  int ignore_label;
  CREMA_HOST_DEVICE bool ignored(int position) const {
    return has_ignore_label && LabelClass(labels[position]) == ignore_label;
  }
  // Offset of class c's value at `position` in an outer x classes x inner blob.
  CREMA_HOST_DEVICE long long at(int position, int c) const {
    return (static_cast<long long>(position / inner) * classes + c) * inner + position % inner;
  }
};

// term[position] = -log(p[label]) (p raised to FLT_MIN so that the loss stays finite; a NaN stays NaN, so a
// diverged net is caught), 0 where ignored.
struct SoftmaxLossTermRule {
  SoftmaxLossLabels labels;
  const float* prob;
  float* term;
  CREMA_HOST_DEVICE void operator()(int position) const {
    if (labels.ignored(position)) {
      term[position] = 0.f;
      return;
    }
    const float p = prob[labels.at(position, LabelClass(labels.labels[position]))];
    term[position] = -logf(p < FLT_MIN ? FLT_MIN : p);
  }
};

// dx (holding the probabilities) minus the one-hot label; 0 for the whole column where the label is ignored.
struct SoftmaxLossGradientRule {
  SoftmaxLossLabels labels;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int position) const {
    if (labels.ignored(position)) {
      for (int c = 0; c < labels.classes; ++c) dx[labels.at(position, c)] = 0.f;
    } else {
      dx[labels.at(position, LabelClass(labels.labels[position]))] -= 1.f;
    }
  }
};

class SoftmaxWithLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "SoftmaxWithLoss"; }
  // Backward reads the labels and the probabilities (the second top, or an internal blob), not the scores.
  bool BackwardReadsBottom(int bottom) const override { return bottom != 0; }
  bool BackwardReadsTop(int top) const override { return top == 1; }
  int ExactNumTopBlobs() const override { return -1; }  // the loss, and the probabilities when named
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The probabilities live in the second top when there is one, else in an internal blob (kept for backward).
  Blob* probabilities(const std::vector<Blob*>& top) { return top.size() > 1 ? top[1] : prob_; }
  float normalizer(int valid_count) const;
  // The labels' view for the rules, on the layer's device.
  SoftmaxLossLabels LabelsOn(const Blob& labels) const;

  std::unique_ptr<SoftmaxLayer> softmax_;
  Blob* prob_ = nullptr;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  ClassAxis split_{};
  // Non-ignored positions in the last forward pass, for the backward pass's normalizer.
  int valid_count_ = 0;
};

}  // namespace crema
