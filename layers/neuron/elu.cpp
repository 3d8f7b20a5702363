#include "layers/neuron/elu.hpp"

namespace crema {

void ELULayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float alpha = param_.elu_param().alpha();
  CREMA_CHECK(std::isfinite(alpha)) << describe() << ": elu_param.alpha is " << alpha << ", but must be finite";
  // In place, backward tells the side of zero from the output, which keeps the input's sign only for alpha >= 0.
  CREMA_CHECK(bottom[0] != top[0] || alpha >= 0.f)
      << describe() << ": elu_param.alpha " << alpha
      << " is negative, which cannot run in place; give the layer a top of its own";
}

void ELULayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(),
                   ELUForward{bottom.data_on(d), top->mutable_data_on(d), param_.elu_param().alpha()});
}

void ELULayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const Blob& sign_source = bottom == &top ? top : *bottom;
  for_each_element(context(), bottom->count(),
                   ELUBackward{sign_source.data_on(d), top.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d),
                               param_.elu_param().alpha()});
}

}  // namespace crema
