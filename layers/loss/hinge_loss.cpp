#include "layers/loss/hinge_loss.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void HingeLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  norm_ = param_.hinge_loss_param().norm();
  CREMA_CHECK(norm_ == HingeLossParameter::L1 || norm_ == HingeLossParameter::L2)
      << describe() << ": hinge_loss_param.norm must be L1 or L2, not " << static_cast<int>(norm_);
}

void HingeLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& scores = *bottom[0];
  CREMA_CHECK(scores.num_axes() >= 1) << describe() << ": the scores (shape " << scores.shape_string()
                                      << ") need a batch axis";
  // Every axis after the batch holds classes.
  split_ = ClassAxis{1, scores.shape(0), scores.count(1), 1};
  CheckLabelCount(*bottom[1], scores, split_);
  top[0]->Reshape({});
  RequestWorkspace(scores.count());  // the per-score loss terms
}

void HingeLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // The labels are checked on the host, where a data layer wrote them, before any rule indexes with them.
  CheckLabels(*bottom[1], split_.classes, nullptr);
  const int count = split_.outer * split_.classes;
  float* terms = workspace();
  for_each_element(context(), count, HingeTermRule{ScoresOn(bottom), norm_ == HingeLossParameter::L2, terms});
  const double loss = sum(context(), count, terms);
  set(context(), 1, split_.outer > 0 ? static_cast<float>(loss / split_.outer) : 0.f,
      top[0]->mutable_data_on(device()));
}

void HingeLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0] || split_.outer == 0) return;
  const Device d = device();
  for_each_element(context(), split_.outer * split_.classes,
                   HingeGradientRule{ScoresOn(bottom), norm_ == HingeLossParameter::L2, top[0]->diff_on(d),
                                     static_cast<float>(split_.outer), bottom[0]->mutable_diff_on(d)});
}

}  // namespace crema
