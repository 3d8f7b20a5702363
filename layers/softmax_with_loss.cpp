#include "layers/softmax_with_loss.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/math_functions.hpp"

namespace crema {

void SoftmaxWithLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LayerParameter softmax_param;
  softmax_param.set_name(name() + "/softmax");
  softmax_param.set_type("Softmax");
  *softmax_param.mutable_softmax_param() = param_.softmax_param();
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param);
  softmax_->SetUp({bottom[0]}, {probabilities(top)});

  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  if (loss_param.has_normalization()) {
    normalization_ = loss_param.normalization();
  } else if (loss_param.has_normalize()) {
    normalization_ = loss_param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  } else {
    normalization_ = LossParameter::VALID;
  }
  // The loss is the objective by default; the probabilities are an output, not a loss.
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void SoftmaxWithLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Reshape({bottom[0]}, {probabilities(top)});
  const int axis = CanonicalAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  outer_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  CREMA_CHECK(bottom[1]->count() == outer_ * inner_)
      << describe() << ": the labels (shape " << bottom[1]->shape_string() << ") must hold one label per "
      << "prediction, " << outer_ * inner_ << " for scores of shape " << bottom[0]->shape_string()
      << " with the classes along axis " << axis;
  top[0]->Reshape({});
}

float SoftmaxWithLossLayer::normalizer(int valid_count) const {
  float value = 1.f;
  switch (normalization_) {
    case LossParameter::FULL:
      value = static_cast<float>(outer_ * inner_);
      break;
    case LossParameter::VALID:
      value = static_cast<float>(valid_count);
      break;
    case LossParameter::BATCH_SIZE:
      value = static_cast<float>(outer_);
      break;
    case LossParameter::NONE:
      value = 1.f;
      break;
  }
  // An all-ignored batch must give a zero loss, not a division by zero.
  return std::max(value, 1.f);
}

void SoftmaxWithLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Blob* prob_blob = probabilities(top);
  softmax_->Forward({bottom[0]}, {prob_blob});
  const float* prob = prob_blob->cpu_data();
  const float* labels = bottom[1]->cpu_data();
  double loss = 0;
  int valid = 0;
  for (int n = 0; n < outer_; ++n) {
    for (int j = 0; j < inner_; ++j) {
      const int index = n * inner_ + j;
      const float label = labels[index];
      if (ignored(label)) continue;
      // Written so that a NaN label fails too.
      CREMA_CHECK(label >= 0.f && label < static_cast<float>(channels_))
          << describe() << ": label " << label << " at index " << index << " of the labels (shape "
          << bottom[1]->shape_string() << ") is outside [0, " << channels_ << ")"
          << (has_ignore_label_ ? " and is not the ignore_label" : "");
      const int c = static_cast<int>(label);
      loss -= std::log(std::max(prob[(n * channels_ + c) * inner_ + j], FLT_MIN));
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
  for (int n = 0; n < outer_; ++n) {
    for (int j = 0; j < inner_; ++j) {
      const float label = labels[n * inner_ + j];
      float* column = dx + n * channels_ * inner_ + j;
      if (ignored(label)) {
        for (int c = 0; c < channels_; ++c) column[c * inner_] = 0.f;
      } else {
        column[static_cast<int>(label) * inner_] -= 1.f;
      }
    }
  }
  cpu_scale(bottom[0]->count(), top[0]->cpu_diff()[0] / normalizer(valid_count_), dx);
}

}  // namespace crema
