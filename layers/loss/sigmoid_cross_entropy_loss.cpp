#include "layers/loss/sigmoid_cross_entropy_loss.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"
#include "layers/loss/loss_normalization.hpp"

namespace crema {

void SigmoidCrossEntropyLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  normalization_ = ChosenNormalization(loss_param, LossParameter::BATCH_SIZE);
}

void SigmoidCrossEntropyLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->count() == bottom[1]->count() && bottom[0]->num_axes() >= 1)
      << describe() << ": the scores (shape " << bottom[0]->shape_string() << ") and the targets (shape "
      << bottom[1]->shape_string() << ") must hold the same number of values, with a batch axis";
  top[0]->Reshape({});
  RequestWorkspace(bottom[0]->count());  // the per-element loss terms
}

float SigmoidCrossEntropyLossLayer::normalizer(const Blob& scores, int valid) const {
  const int outer = scores.shape(0);
  return LossNormalizer(normalization_, outer, outer > 0 ? scores.count() / outer : 0, valid);
}

SigmoidCrossEntropyTargets SigmoidCrossEntropyLossLayer::TargetsOn(const Blob& targets) const {
  return {targets.data_on(device()), has_ignore_label_, static_cast<float>(ignore_label_)};
}

void SigmoidCrossEntropyLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // The targets are checked on the host, where a data layer wrote them; the valid count is the normalizer's.
  const float* t = bottom[1]->cpu_data();
  const int count = bottom[0]->count();
  int valid = 0;
  for (int i = 0; i < count; ++i) {
    if (ignored(t[i])) continue;
    CREMA_CHECK(t[i] >= 0.f && t[i] <= 1.f)
        << describe() << ": target " << t[i] << " at index " << i << " of the targets (shape "
        << bottom[1]->shape_string() << ") is outside [0, 1]"
        << (has_ignore_label_ ? " and is not the ignore_label" : "");
    ++valid;
  }
  valid_count_ = valid;
  const Device d = device();
  float* terms = workspace();
  for_each_element(context(), count, SigmoidCrossEntropyTermRule{TargetsOn(*bottom[1]), bottom[0]->data_on(d), terms});
  const double loss = sum(context(), count, terms);
  set(context(), 1, static_cast<float>(loss / normalizer(*bottom[0], valid)), top[0]->mutable_data_on(d));
}

void SigmoidCrossEntropyLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the targets (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(
      context(), bottom[0]->count(),
      SigmoidCrossEntropyGradientRule{TargetsOn(*bottom[1]), bottom[0]->data_on(d), top[0]->diff_on(d),
                                      normalizer(*bottom[0], valid_count_), bottom[0]->mutable_diff_on(d)});
}

}  // namespace crema
