// The infogain loss: a softmax over the class axis, then a multinomial logistic loss in which every class's
// log-probability is weighted by a row of the infogain matrix H (C x C). For a position with label y and
// probabilities p (the softmax of the scores along the class axis):
//   loss = -sum over non-ignored positions of sum_l H[y, l] log(max(p_l, 1e-20)) / normalizer
// With H the identity this is SoftmaxWithLoss. The softmax inside follows current Caffe (older Caffe took
// probabilities as the first bottom).
//
// Bottoms: scores (outer x C x inner, C along infogain_loss_param.axis, default 1), labels (outer x inner
// values, integer classes in [0, C) stored as floats, or loss_param.ignore_label), and optionally H (any shape
// holding C x C values, row y for label y). Without the third bottom, H is read once, at set-up, from the
// BlobProto file infogain_loss_param.source (.binaryproto). Tops: the loss (a scalar, loss weight 1 unless
// set), and optionally the probabilities (the scores' shape; not a loss, weight 0 unless set).
//
// Normalizer (at least 1), from loss_param.normalization: FULL = outer * inner, VALID = the non-ignored
// positions (default), BATCH_SIZE = outer, NONE = 1; the deprecated normalize means VALID (true) or
// BATCH_SIZE (false) when normalization is not set.
//
// Gradient to the scores only: (p_l sum_k H[y, k] - H[y, l]) / normalizer at each non-ignored position, 0 at
// ignored ones; none to the labels or to H. Same as Caffe.
//
// Runs on the CPU and the GPU from the same code: the softmax's rules, then one rule per position for the loss
// terms and one for the gradient (infogain_loss.cu compiles them); the labels are checked on the host, the terms
// summed on the context.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/common/softmax.hpp"
#include "layers/layer.hpp"

namespace crema {

// One position (outer n, inner j) of the probabilities (outer x classes x inner) and its label, checked on the
// host before the rules run.
struct InfogainPosition {
  const float* prob;
  const float* labels;
  const float* h;  // classes x classes, row y for label y
  int classes, inner;
  bool has_ignore_label;
  int ignore_label;
  CREMA_HOST_DEVICE bool ignored(int position) const {
    return has_ignore_label && LabelClass(labels[position]) == ignore_label;
  }
  // Offset of class c's value at `position`.
  CREMA_HOST_DEVICE long long at(int position, int c) const {
    return (static_cast<long long>(position / inner) * classes + c) * inner + position % inner;
  }
  // The row of H for the position's label.
  CREMA_HOST_DEVICE const float* row(int position) const {
    return h + static_cast<long long>(labels[position]) * classes;
  }
};

// term[position] = -sum_l H[y, l] log(max(p_l, floor)), 0 where ignored.
struct InfogainTermRule {
  InfogainPosition at;
  float floor;
  float* term;
  CREMA_HOST_DEVICE void operator()(int position) const {
    if (at.ignored(position)) {
      term[position] = 0.f;
      return;
    }
    const float* row = at.row(position);
    float total = 0.f;
    for (int l = 0; l < at.classes; ++l) {
      const float p = at.prob[at.at(position, l)];
      total -= row[l] * logf(p < floor ? floor : p);
    }
    term[position] = total;
  }
};

// dx = dloss / normalizer * (p_l sum_k H[y, k] - H[y, l]) for every class l of a position; 0 where ignored.
struct InfogainGradientRule {
  InfogainPosition at;
  const float* loss_diff;
  float normalizer;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int position) const {
    if (at.ignored(position)) {
      for (int l = 0; l < at.classes; ++l) dx[at.at(position, l)] = 0.f;
      return;
    }
    const float* row = at.row(position);
    float row_sum = 0.f;
    for (int l = 0; l < at.classes; ++l) row_sum += row[l];
    const float scale = loss_diff[0] / normalizer;
    for (int l = 0; l < at.classes; ++l) {
      const long long k = at.at(position, l);
      dx[k] = scale * (at.prob[k] * row_sum - row[l]);
    }
  }
};

class InfogainLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "InfogainLoss"; }
  // Backward reads the probabilities (an internal blob, or top 1), the labels and H, not the scores.
  bool BackwardReadsBottom(int bottom) const override { return bottom != 0; }
  bool BackwardReadsTop(int top) const override { return top == 1; }
  int ExactNumBottomBlobs() const override { return -1; }  // H from a bottom or from infogain_loss_param.source
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }  // the loss, and the probabilities when named
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // Only the scores take a gradient: not the labels, not H.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // H, when read from infogain_loss_param.source.
  std::vector<HeldBuffer> HeldBuffers() const override;

  // Probabilities are clamped to at least this before the log.
  static constexpr float kMinProbability = 1e-20f;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* probabilities(const std::vector<Blob*>& top) { return top.size() > 1 ? top[1] : prob_; }
  const Blob& infogain(const std::vector<Blob*>& bottom) const {
    return bottom.size() > 2 ? *bottom[2] : infogain_from_file_;
  }
  // The probabilities, labels and H, on the layer's device, for the rules.
  InfogainPosition PositionsOn(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);

  std::unique_ptr<SoftmaxLayer> softmax_;
  Blob* prob_ = nullptr;
  // H as read from infogain_loss_param.source (when there is no third bottom).
  Blob infogain_from_file_;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  ClassAxis split_{};
  // Non-ignored positions in the last forward pass, for the backward pass's normalizer.
  int valid_count_ = 0;
};

}  // namespace crema
