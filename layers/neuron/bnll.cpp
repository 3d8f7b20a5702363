#include "layers/neuron/bnll.hpp"

namespace crema {

void BNLLLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(), BNLLForward{bottom.data_on(d), top->mutable_data_on(d)});
}

void BNLLLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   BNLLBackward{top.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d)});
}

}  // namespace crema
