#include "layers/accuracy.hpp"

#include <vector>

namespace crema {

void AccuracyLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const AccuracyParameter& accuracy_param = param_.accuracy_param();
  CREMA_CHECK(accuracy_param.top_k() >= 1) << describe() << ": accuracy_param.top_k must be at least 1";
  top_k_ = static_cast<int>(accuracy_param.top_k());
  has_ignore_label_ = accuracy_param.has_ignore_label();
  ignore_label_ = accuracy_param.ignore_label();
}

void AccuracyLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  split_ = SplitAtClassAxis(*bottom[0], param_.accuracy_param().axis(), "accuracy_param.axis");
  // Compared as unsigned so that a huge top_k cannot wrap to a negative int and pass.
  CREMA_CHECK(param_.accuracy_param().top_k() <= static_cast<unsigned>(split_.classes))
      << describe() << ": accuracy_param.top_k " << param_.accuracy_param().top_k() << " exceeds the "
      << split_.classes << " classes of the scores (shape " << bottom[0]->shape_string() << ")";
  CheckLabelCount(*bottom[1], *bottom[0], split_);
  top[0]->Reshape({});
  if (top.size() > 1) top[1]->Reshape({split_.classes});
}

void AccuracyLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* scores = bottom[0]->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  const int classes = split_.classes, inner = split_.inner;
  std::vector<int> per_class_total(classes, 0), per_class_right(classes, 0);
  int total = 0, right = 0;
  for (int n = 0; n < split_.outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int index = n * inner + j;
      const float label_value = labels[index];
      if (has_ignore_label_ && label_value == static_cast<float>(ignore_label_)) continue;
      const int label = CheckedLabel(label_value, index, *bottom[1], classes, has_ignore_label_);
      const float* column = scores + n * classes * inner + j;
      const float label_score = column[label * inner];
      int higher = 0;
      for (int c = 0; c < classes && higher < top_k_; ++c) higher += column[c * inner] > label_score;
      ++total;
      ++per_class_total[label];
      if (higher < top_k_) {
        ++right;
        ++per_class_right[label];
      }
    }
  }
  top[0]->mutable_cpu_data()[0] = total == 0 ? 0.f : static_cast<float>(right) / total;
  if (top.size() > 1) {
    float* per_class = top[1]->mutable_cpu_data();
    for (int c = 0; c < classes; ++c) {
      per_class[c] = per_class_total[c] == 0 ? 0.f : static_cast<float>(per_class_right[c]) / per_class_total[c];
    }
  }
}

void AccuracyLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i) {
    CREMA_CHECK(!propagate_down[i]) << describe() << ": accuracy has no gradient, so bottom " << i
                                    << " cannot be backpropagated; set propagate_down: false for it";
  }
}

}  // namespace crema
