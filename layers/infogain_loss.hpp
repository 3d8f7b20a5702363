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
#pragma once

#include <memory>
#include <vector>

#include "layers/layer.hpp"
#include "layers/softmax.hpp"

namespace crema {

class InfogainLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "InfogainLoss"; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  // Only the scores take a gradient: not the labels, not H.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Probabilities are clamped to at least this before the log.
  static constexpr float kMinProbability = 1e-20f;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* probabilities(const std::vector<Blob*>& top) { return top.size() > 1 ? top[1] : prob_; }
  const Blob& infogain(const std::vector<Blob*>& bottom) const {
    return bottom.size() > 2 ? *bottom[2] : infogain_from_file_;
  }
  bool ignored(float label) const { return has_ignore_label_ && label == static_cast<float>(ignore_label_); }

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
