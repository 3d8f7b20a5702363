#include "layers/loss/multinomial_logistic_loss.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void MultinomialLogisticLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
}

void MultinomialLogisticLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& prob = *bottom[0];
  CREMA_CHECK(prob.num_axes() >= 1) << describe() << ": the probabilities (shape " << prob.shape_string()
                                    << ") need a batch axis";
  // Every axis after the batch holds classes.
  split_ = ClassAxis{1, prob.shape(0), prob.count(1), 1};
  CheckLabelCount(*bottom[1], prob, split_);
  top[0]->Reshape({});
  RequestWorkspace(split_.outer);  // the per-item loss terms
}

void MultinomialLogisticLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // The labels are checked on the host, where a data layer wrote them, before any rule indexes with them.
  CheckLabels(*bottom[1], split_.classes, nullptr);
  float* terms = workspace();
  for_each_element(context(), split_.outer, MultinomialLogisticTermRule{LabelledOn(bottom), terms});
  const double loss = sum(context(), split_.outer, terms);
  set(context(), 1, split_.outer > 0 ? static_cast<float>(loss / split_.outer) : 0.f,
      top[0]->mutable_data_on(device()));
}

void MultinomialLogisticLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[1]) << describe() << ": cannot backpropagate to the labels (bottom 1); set "
                                  << "propagate_down: false for it";
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(context(), split_.outer * split_.classes,
                   MultinomialLogisticGradientRule{LabelledOn(bottom), top[0]->diff_on(d),
                                                   static_cast<float>(split_.outer), bottom[0]->mutable_diff_on(d)});
}

}  // namespace crema
