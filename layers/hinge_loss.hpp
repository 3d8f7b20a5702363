// The one-versus-all hinge loss of a linear classifier (an SVM objective): for item n with true class y_n and
// every class c, the margin violation m_nc = max(0, 1 - t_nc * x_nc) with t_nc = +1 for c = y_n and -1
// otherwise; loss = sum_nc m_nc / N (norm L1) or sum_nc m_nc^2 / N (norm L2), N the first axis of the scores.
//
// Bottoms: scores (N x ..., every axis after the first holds classes, so C = count / N) and labels (N values,
// integer classes in [0, C) stored as floats). Top: the loss (a scalar, loss weight 1 unless set).
//
// Params: hinge_loss_param.norm (L1, default; L2). Gradient to the scores only: -t_nc / N where m_nc > 0 (L1;
// 0 at the kink m_nc = 0, as Caffe), -2 t_nc m_nc / N (L2). No gradient to the labels. Same as Caffe, except
// that a label outside [0, C) is an error naming its value and index.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class HingeLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "HingeLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The margin violation max(0, 1 - t x) of one score x; t = +1 for the item's true class, -1 otherwise.
  static float Violation(float score, bool true_class) {
    const float margin = 1.f + (true_class ? -score : score);
    return margin > 0.f ? margin : 0.f;
  }

  HingeLossParameter::Norm norm_ = HingeLossParameter::L1;
  ClassAxis split_{};
};

}  // namespace crema
