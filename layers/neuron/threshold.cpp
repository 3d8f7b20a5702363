#include "layers/neuron/threshold.hpp"

namespace crema {

void ThresholdLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(),
                   ThresholdForward{bottom.data_on(d), top->mutable_data_on(d), param_.threshold_param().threshold()});
}

void ThresholdLayer::BackwardElements(const Blob& top, Blob* bottom) {
  CREMA_FAIL() << describe() << ": Threshold has no backward pass (its gradient is zero almost everywhere); "
               << "do not ask for the gradient of its bottom (propagate_down: false, or no force_backward)";
}

}  // namespace crema
