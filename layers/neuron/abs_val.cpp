#include "layers/neuron/abs_val.hpp"

namespace crema {

void AbsValLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0] != top[0]) << describe()
                                   << ": cannot run in place (the backward pass needs the input's sign); give the "
                                      "layer a top of its own";
}

void AbsValLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(), AbsValForward{bottom.data_on(d), top->mutable_data_on(d)});
}

void AbsValLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   AbsValBackward{bottom->data_on(d), top.diff_on(d), bottom->mutable_diff_on(d)});
}

}  // namespace crema
