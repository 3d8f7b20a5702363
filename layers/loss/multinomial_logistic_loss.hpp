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
//
// Runs on the CPU and the GPU from the same rules (multinomial_logistic_loss.cu compiles them): the labels are
// checked on the host, the per-item terms summed on the context.
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// The probability of item n's labelled class (labels checked on the host before the rules run), raised to
// `floor` so that its log and reciprocal stay finite.
struct MultinomialLabelledProbability {
  const float* prob;
  const float* labels;
  int classes;
  float floor;
  CREMA_HOST_DEVICE float operator()(int n) const {
    const float p = prob[static_cast<long long>(n) * classes + LabelClass(labels[n])];
    return p < floor ? floor : p;
  }
};

// term[n] = -log(p[n, y_n]).
struct MultinomialLogisticTermRule {
  MultinomialLabelledProbability labelled;
  float* term;
  CREMA_HOST_DEVICE void operator()(int n) const { term[n] = -logf(labelled(n)); }
};

// dx = -dloss / (N p[n, y_n]) at each item's labelled class, 0 elsewhere: one rule per probability.
struct MultinomialLogisticGradientRule {
  MultinomialLabelledProbability labelled;
  const float* loss_diff;
  float batch;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const int n = i / labelled.classes;
    const bool labelled_class = i % labelled.classes == LabelClass(labelled.labels[n]);
    dx[i] = labelled_class ? -loss_diff[0] / batch / labelled(n) : 0.f;
  }
};

class MultinomialLogisticLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "MultinomialLogisticLoss"; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Probabilities are clamped to at least this before the log (and the division of the gradient).
  static constexpr float kMinProbability = 1e-20f;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The probabilities and labels, on the layer's device, for the rules.
  MultinomialLabelledProbability LabelledOn(const std::vector<Blob*>& bottom) const {
    return {bottom[0]->data_on(device()), bottom[1]->data_on(device()), split_.classes, kMinProbability};
  }

  ClassAxis split_{};
};

}  // namespace crema
