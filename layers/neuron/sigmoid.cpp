#include "layers/neuron/sigmoid.hpp"

namespace crema {

void SigmoidLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(), SigmoidForward{bottom.data_on(d), top->mutable_data_on(d)});
}

void SigmoidLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   SigmoidBackward{top.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d)});
}

}  // namespace crema
