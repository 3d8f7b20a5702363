#include "layers/hinge_loss.hpp"

namespace crema {

void HingeLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  norm_ = param_.hinge_loss_param().norm();
  CREMA_CHECK(norm_ == HingeLossParameter::L1 || norm_ == HingeLossParameter::L2)
      << describe() << ": hinge_loss_param.norm must be L1 or L2, not " << static_cast<int>(norm_);
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void HingeLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& scores = *bottom[0];
  CREMA_CHECK(scores.num_axes() >= 1) << describe() << ": the scores (shape " << scores.shape_string()
                                      << ") need a batch axis";
  // Every axis after the batch holds classes.
  split_ = ClassAxis{1, scores.shape(0), scores.count(1), 1};
  CheckLabelCount(*bottom[1], scores, split_);
  top[0]->Reshape({});
}

void HingeLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  const int classes = split_.classes;
  double loss = 0;
  for (int n = 0; n < split_.outer; ++n) {
    const int label = CheckedLabel(labels[n], n, *bottom[1], classes, false);
    for (int c = 0; c < classes; ++c) {
      const double m = Violation(x[n * classes + c], c == label);
      loss += norm_ == HingeLossParameter::L2 ? m * m : m;
    }
  }
  top[0]->mutable_cpu_data()[0] = split_.outer > 0 ? static_cast<float>(loss / split_.outer) : 0.f;
}

void HingeLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0] || split_.outer == 0) return;
  const float* x = bottom[0]->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int classes = split_.classes;
  const float scale = top[0]->cpu_diff()[0] / static_cast<float>(split_.outer);
  for (int n = 0; n < split_.outer; ++n) {
    const int label = CheckedLabel(labels[n], n, *bottom[1], classes, false);
    for (int c = 0; c < classes; ++c) {
      const bool true_class = c == label;
      const float m = Violation(x[n * classes + c], true_class);
      // d m / d x = -t where m > 0.
      const float slope = norm_ == HingeLossParameter::L2 ? 2.f * m : (m > 0.f ? 1.f : 0.f);
      dx[n * classes + c] = scale * (true_class ? -slope : slope);
    }
  }
}

}  // namespace crema
