// Classification accuracy: the fraction of predictions whose label scores among the top_k classes.
//
// Bottoms: scores (outer x C x inner, C along accuracy_param.axis) and labels (outer x inner values, integers
// stored as floats). Tops: the accuracy (a scalar), and optionally the per-class accuracy (shape {C}; a
// class with no labels in the batch reads 0). A prediction is right when fewer than top_k classes score
// strictly higher than the label's class, so ties count in the label's favour.
//
// Params (accuracy_param): top_k (default 1, at most C), axis (default 1), ignore_label (positions with this
// label are skipped). Not a loss and not differentiable: backward fails if asked for.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// hit[position] = 1 when fewer than top_k classes score strictly higher than the label's (ties count for the
// label), else 0; 0 where the label is ignored. Labels were checked on the host. accuracy.cu compiles it.
struct AccuracyHitRule {
  const float* scores;
  const float* labels;
  float* hit;
  int classes, inner, top_k;
  bool has_ignore_label;
  int ignore_label;
  CREMA_HOST_DEVICE void operator()(int position) const {
    if (has_ignore_label && LabelClass(labels[position]) == ignore_label) {
      hit[position] = 0.f;
      return;
    }
    const float* column = scores + static_cast<long long>(position / inner) * classes * inner + position % inner;
    const float label_score = column[LabelClass(labels[position]) * inner];
    int higher = 0;
    for (int c = 0; c < classes && higher < top_k; ++c) higher += column[c * inner] > label_score;
    hit[position] = higher < top_k ? 1.f : 0.f;
  }
};

class AccuracyLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  ClassAxis split_{};
  Blob* hits_ = nullptr;  // AccuracyHitRule's output, one value per position
};

}  // namespace crema
