// The multinomial logistic (negative log-likelihood) loss of given probabilities: loss = -1/N sum_n
// log(max(p[n, y_n], 1e-20)), N the first axis. Use it after a Softmax (or anything producing probabilities);
// SoftmaxWithLoss fuses the two more stably.
//
// Bottoms: probabilities (N x ..., every axis after the first holds classes, so C = count / N) and labels (N
// values, integer classes in [0, C) stored as floats). Top: the loss (a scalar, loss weight 1 unless set). No
// parameters beyond loss_weight.
//
// Gradient to the probabilities only: -1 / (N max(p[n, y_n], 1e-20)) at each item's true class, 0 elsewhere.
// Same as Caffe, except that a label outside [0, C) is an error naming its value and index.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class MultinomialLogisticLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "MultinomialLogisticLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Probabilities are clamped to at least this before the log (and the division of the gradient).
  static constexpr float kMinProbability = 1e-20f;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  ClassAxis split_{};
};

}  // namespace crema
