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
//
// Runs on the CPU and the GPU from the same rules, one per score (hinge_loss.cu compiles them): the labels are
// checked on the host, the per-score terms summed on the context.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One score of the N x C scores and its item's label (checked on the host before the rules run).
struct HingeScore {
  const float* x;
  const float* labels;
  int classes;
  // The margin violation max(0, 1 - t x) of score i; t = +1 for the item's true class, -1 otherwise.
  CREMA_HOST_DEVICE float violation(int i) const {
    const float margin = 1.f + (true_class(i) ? -x[i] : x[i]);
    return margin > 0.f ? margin : 0.f;
  }
  CREMA_HOST_DEVICE bool true_class(int i) const { return i % classes == LabelClass(labels[i / classes]); }
};

// term[i] = m (L1) or m^2 (L2), m the margin violation of score i.
struct HingeTermRule {
  HingeScore score;
  bool squared;
  float* term;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float m = score.violation(i);
    term[i] = squared ? m * m : m;
  }
};

// dx = dloss / N * d(term) / dx: -t where m > 0 (L1; 0 at the kink, as Caffe), -2 t m (L2).
struct HingeGradientRule {
  HingeScore score;
  bool squared;
  const float* loss_diff;
  float batch;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float m = score.violation(i);
    const float slope = squared ? 2.f * m : (m > 0.f ? 1.f : 0.f);
    const float scale = loss_diff[0] / batch;
    dx[i] = scale * (score.true_class(i) ? -slope : slope);
  }
};

class HingeLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "HingeLoss"; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The scores and labels, on the layer's device, for the rules.
  HingeScore ScoresOn(const std::vector<Blob*>& bottom) const {
    return {bottom[0]->data_on(device()), bottom[1]->data_on(device()), split_.classes};
  }

  HingeLossParameter::Norm norm_ = HingeLossParameter::L1;
  ClassAxis split_{};
};

}  // namespace crema
