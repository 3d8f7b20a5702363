#include "layers/neuron/relu.hpp"

namespace crema {

void ReLULayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // In place, backward can only tell which side of zero an input was from the output, and y > 0 iff x > 0
  // holds only for a non-negative slope.
  CREMA_CHECK(bottom[0] != top[0] || param_.relu_param().negative_slope() >= 0.f)
      << describe() << ": relu_param.negative_slope " << param_.relu_param().negative_slope()
      << " is negative, which cannot run in place; give the layer a top of its own";
}

void ReLULayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(),
                   ReLUForward{bottom.data_on(d), top->mutable_data_on(d), param_.relu_param().negative_slope()});
}

void ReLULayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const Blob& sign_source = bottom == &top ? top : *bottom;
  for_each_element(context(), bottom->count(),
                   ReLUBackward{sign_source.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d),
                                param_.relu_param().negative_slope()});
}

}  // namespace crema
