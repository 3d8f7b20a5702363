#include "layers/loss/accuracy.hpp"

#include <vector>

#include "core/math_functions.hpp"

namespace crema {

void AccuracyLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const AccuracyParameter& accuracy_param = param_.accuracy_param();
  CREMA_CHECK(accuracy_param.top_k() >= 1) << describe() << ": accuracy_param.top_k must be at least 1";
  top_k_ = static_cast<int>(accuracy_param.top_k());
  has_ignore_label_ = accuracy_param.has_ignore_label();
  ignore_label_ = accuracy_param.ignore_label();
  if (hits_ == nullptr) hits_ = AddInternalBlob("hits", InternalLifetime::kUntilBackward);
}

void AccuracyLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  split_ = SplitAtClassAxis(*bottom[0], param_.accuracy_param().axis(), "accuracy_param.axis");
  // Compared as unsigned so that a huge top_k cannot wrap to a negative int and pass.
  CREMA_CHECK(param_.accuracy_param().top_k() <= static_cast<unsigned>(split_.classes))
      << describe() << ": accuracy_param.top_k " << param_.accuracy_param().top_k() << " exceeds the " << split_.classes
      << " classes of the scores (shape " << bottom[0]->shape_string() << ")";
  CheckLabelCount(*bottom[1], *bottom[0], split_);
  top[0]->Reshape({});
  hits_->Reshape({split_.outer * split_.inner});
  if (top.size() > 1) top[1]->Reshape({split_.classes});
}

void AccuracyLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  // Labels are checked on the host, where a data layer wrote them, before a rule indexes with them.
  const int classes = split_.classes, positions = split_.outer * split_.inner;
  std::vector<int> per_class_total(classes, 0);
  const int total = CheckLabels(*bottom[1], classes, has_ignore_label_ ? &ignore_label_ : nullptr, &per_class_total);
  float* hits = hits_->mutable_data_on(d);
  for_each_element(context(), positions,
                   AccuracyHitRule{bottom[0]->data_on(d), bottom[1]->data_on(d), hits, classes, split_.inner, top_k_,
                                   has_ignore_label_, ignore_label_});
  const double right = sum(context(), positions, hits);
  set(context(), 1, total == 0 ? 0.f : static_cast<float>(right / total), top[0]->mutable_data_on(d));
  if (top.size() > 1) {
    // Per class: the hits counted on the host (one value per position).
    const float* labels = bottom[1]->cpu_data();
    const float* hit_values = hits_->cpu_data();
    std::vector<int> per_class_right(classes, 0);
    for (int index = 0; index < positions; ++index)
      if (hit_values[index] > 0.f) ++per_class_right[static_cast<int>(labels[index])];
    float* per_class = top[1]->mutable_cpu_data();
    for (int c = 0; c < classes; ++c) {
      per_class[c] = per_class_total[c] == 0 ? 0.f : static_cast<float>(per_class_right[c]) / per_class_total[c];
    }
  }
}

void AccuracyLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i) {
    CREMA_CHECK(!propagate_down[i]) << describe() << ": accuracy has no gradient, so bottom " << i
                                    << " cannot be backpropagated; set propagate_down: false for it";
  }
}

}  // namespace crema
