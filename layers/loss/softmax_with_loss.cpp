#include "layers/loss/softmax_with_loss.hpp"

#include "core/math_functions.hpp"
#include "layers/loss/loss_normalization.hpp"

namespace crema {

void SoftmaxWithLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LayerParameter softmax_param;
  softmax_param.set_name(name() + "/softmax");
  softmax_param.set_type("Softmax");
  *softmax_param.mutable_softmax_param() = param_.softmax_param();
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param, shared_context());
  if (top.size() == 1 && prob_ == nullptr) prob_ = AddInternalBlob("probabilities", InternalLifetime::kUntilBackward);
  softmax_->SetUp({bottom[0]}, {probabilities(top)});

  const LossParameter& loss_param = param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  ignore_label_ = loss_param.ignore_label();
  normalization_ = ChosenNormalization(loss_param, LossParameter::VALID);
  // The loss is the objective by default; the probabilities are an output, not a loss.
}

void SoftmaxWithLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Reshape({bottom[0]}, {probabilities(top)});
  split_ = SplitAtClassAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  CheckLabelCount(*bottom[1], *bottom[0], split_);
  top[0]->Reshape({});
  RequestWorkspace(static_cast<size_t>(split_.outer) * split_.inner);  // the per-position loss terms
}

float SoftmaxWithLossLayer::normalizer(int valid_count) const {
  return LossNormalizer(normalization_, split_.outer, split_.inner, valid_count);
}

SoftmaxLossLabels SoftmaxWithLossLayer::LabelsOn(const Blob& labels) const {
  return {labels.data_on(device()), split_.classes, split_.inner, has_ignore_label_, ignore_label_};
}

void SoftmaxWithLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  Blob* prob_blob = probabilities(top);
  softmax_->Forward({bottom[0]}, {prob_blob});
  // The labels are checked on the host, where a data layer wrote them: a bad one is named before any rule
  // indexes with it.
  const int positions = split_.outer * split_.inner;
  const int valid = CheckLabels(*bottom[1], split_.classes, has_ignore_label_ ? &ignore_label_ : nullptr);
  valid_count_ = valid;
  float* terms = workspace();
  for_each_element(context(), positions, SoftmaxLossTermRule{LabelsOn(*bottom[1]), prob_blob->data_on(d), terms});
  const double loss = sum(context(), positions, terms);
  set(context(), 1, static_cast<float>(loss / normalizer(valid)), top[0]->mutable_data_on(d));
}

void SoftmaxWithLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const Device d = device();
  float* dx = bottom[0]->mutable_diff_on(d);
  copy(context(), bottom[0]->count(), probabilities(top)->data_on(d), dx);
  for_each_element(context(), split_.outer * split_.inner, SoftmaxLossGradientRule{LabelsOn(*bottom[1]), dx});
  // The loss weight (the top's gradient) is one value; reading it on the host costs one small copy on a GPU.
  scale(context(), bottom[0]->count(), top[0]->cpu_diff()[0] / normalizer(valid_count_), dx);
}

}  // namespace crema
