#include "layers/neuron/swish.hpp"

namespace crema {

void SwishLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float beta = param_.swish_param().beta();
  CREMA_CHECK(std::isfinite(beta)) << describe() << ": swish_param.beta is " << beta << ", but must be finite";
  if (sigmoid_ == nullptr) sigmoid_ = AddInternalBlob("sigmoid", InternalLifetime::kUntilBackward);
}

void SwishLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  sigmoid_->ReshapeLike(*bottom[0]);
}

void SwishLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(),
                   SwishForward{bottom.data_on(d), sigmoid_->mutable_data_on(d), top->mutable_data_on(d),
                                param_.swish_param().beta()});
}

void SwishLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   SwishBackward{top.data_on(d), sigmoid_->data_on(d), top.diff_on(d), bottom->mutable_diff_on(d),
                                 param_.swish_param().beta()});
}

}  // namespace crema
