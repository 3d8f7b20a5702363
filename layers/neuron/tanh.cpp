#include "layers/neuron/tanh.hpp"

namespace crema {

void TanHLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(), TanHForward{bottom.data_on(d), top->mutable_data_on(d)});
}

void TanHLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   TanHBackward{top.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d)});
}

}  // namespace crema
