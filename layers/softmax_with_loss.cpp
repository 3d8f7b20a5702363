#include "layers/softmax_with_loss.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/math_functions.hpp"
#include "layers/loss_normalization.hpp"

namespace crema {

void SoftmaxWithLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LayerParameter softmax_param;
  softmax_param.set_name(name() + "/softmax");
  softmax_param.set_type("Softmax");
  *softmax_param.mutable_softmax_param() = param_.softmax_param();
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param, shared_context());
  if (top.size() == 1 && prob_ == nullptr) prob_ = AddInternalBlob("probabilities");
  softmax_->SetUp({bottom[0]}, {probabilities(top)});

  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  normalization_ = ChosenNormalization(loss_param, LossParameter::VALID);
  // The loss is the objective by default; the probabilities are an output, not a loss.
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void SoftmaxWithLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Reshape({bottom[0]}, {probabilities(top)});
  split_ = SplitAtClassAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  CheckLabelCount(*bottom[1], *bottom[0], split_);
  top[0]->Reshape({});
}

float SoftmaxWithLossLayer::normalizer(int valid_count) const {
  return LossNormalizer(normalization_, split_.outer, split_.inner, valid_count);
}

void SoftmaxWithLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Blob* prob_blob = probabilities(top);
  softmax_->Forward({bottom[0]}, {prob_blob});
  const float* prob = prob_blob->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  double loss = 0;
  int valid = 0;
  const int classes = split_.classes, inner = split_.inner;
  for (int n = 0; n < split_.outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int index = n * inner + j;
      const float label = labels[index];
      if (ignored(label)) continue;
      const int c = CheckedLabel(label, index, *bottom[1], classes, has_ignore_label_);
      loss -= std::log(std::max(prob[(n * classes + c) * inner + j], FLT_MIN));
      ++valid;
    }
  }
  valid_count_ = valid;
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss / normalizer(valid));
}

void SoftmaxWithLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const float* prob = probabilities(top)->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  cpu_copy(bottom[0]->count(), prob, dx);
  const int classes = split_.classes, inner = split_.inner;
  for (int n = 0; n < split_.outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const float label = labels[n * inner + j];
      float* column = dx + n * classes * inner + j;
      if (ignored(label)) {
        for (int c = 0; c < classes; ++c) column[c * inner] = 0.f;
      } else {
        column[static_cast<int>(label) * inner] -= 1.f;
      }
    }
  }
  cpu_scale(bottom[0]->count(), top[0]->cpu_diff()[0] / normalizer(valid_count_), dx);
}

}  // namespace crema
