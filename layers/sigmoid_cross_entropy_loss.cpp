#include "layers/sigmoid_cross_entropy_loss.hpp"

#include <cmath>

#include "layers/loss_normalization.hpp"

namespace crema {

void SigmoidCrossEntropyLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  normalization_ = ChosenNormalization(loss_param, LossParameter::BATCH_SIZE);
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void SigmoidCrossEntropyLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->count() == bottom[1]->count() && bottom[0]->num_axes() >= 1)
      << describe() << ": the scores (shape " << bottom[0]->shape_string() << ") and the targets (shape "
      << bottom[1]->shape_string() << ") must hold the same number of values, with a batch axis";
  top[0]->Reshape({});
}

float SigmoidCrossEntropyLossLayer::normalizer(const Blob& scores, int valid) const {
  const int outer = scores.shape(0);
  return LossNormalizer(normalization_, outer, outer > 0 ? scores.count() / outer : 0, valid);
}

void SigmoidCrossEntropyLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  double loss = 0;
  int valid = 0;
  for (int i = 0; i < bottom[0]->count(); ++i) {
    if (ignored(t[i])) continue;
    CREMA_CHECK(t[i] >= 0.f && t[i] <= 1.f)
        << describe() << ": target " << t[i] << " at index " << i << " of the targets (shape "
        << bottom[1]->shape_string() << ") is outside [0, 1]"
        << (has_ignore_label_ ? " and is not the ignore_label" : "");
    const double xi = x[i];
    loss += std::max(xi, 0.0) - xi * t[i] + std::log1p(std::exp(-std::fabs(xi)));
    ++valid;
  }
  valid_count_ = valid;
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss / normalizer(*bottom[0], valid));
}

void SigmoidCrossEntropyLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the targets (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const float scale = top[0]->cpu_diff()[0] / normalizer(*bottom[0], valid_count_);
  for (int i = 0; i < bottom[0]->count(); ++i) {
    if (ignored(t[i])) {
      dx[i] = 0.f;
      continue;
    }
    // sigmoid(x), written so that exp never overflows.
    const float e = std::exp(-std::fabs(x[i]));
    const float sigmoid = x[i] >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dx[i] = scale * (sigmoid - t[i]);
  }
}

}  // namespace crema
