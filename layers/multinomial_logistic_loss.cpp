#include "layers/multinomial_logistic_loss.hpp"

#include <algorithm>
#include <cmath>

#include "core/math_functions.hpp"

namespace crema {

void MultinomialLogisticLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void MultinomialLogisticLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& prob = *bottom[0];
  CREMA_CHECK(prob.num_axes() >= 1) << describe() << ": the probabilities (shape " << prob.shape_string()
                                    << ") need a batch axis";
  // Every axis after the batch holds classes.
  split_ = ClassAxis{1, prob.shape(0), prob.count(1), 1};
  CheckLabelCount(*bottom[1], prob, split_);
  top[0]->Reshape({});
}

void MultinomialLogisticLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* prob = bottom[0]->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  double loss = 0;
  for (int n = 0; n < split_.outer; ++n) {
    const int label = CheckedLabel(labels[n], n, *bottom[1], split_.classes, false);
    loss -= std::log(std::max(prob[n * split_.classes + label], kMinProbability));
  }
  top[0]->mutable_cpu_data()[0] = split_.outer > 0 ? static_cast<float>(loss / split_.outer) : 0.f;
}

void MultinomialLogisticLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const float* prob = bottom[0]->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), 0.f, dx);
  if (split_.outer == 0) return;
  const float scale = -top[0]->cpu_diff()[0] / static_cast<float>(split_.outer);
  for (int n = 0; n < split_.outer; ++n) {
    const int i = n * split_.classes + CheckedLabel(labels[n], n, *bottom[1], split_.classes, false);
    dx[i] = scale / std::max(prob[i], kMinProbability);
  }
}

}  // namespace crema
