#include "layers/neuron/clip.hpp"

#include "core/math_functions.hpp"

namespace crema {

void ClipLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ClipParameter& p = param_.clip_param();
  CREMA_CHECK(p.has_min()) << describe() << ": clip_param.min is required";
  CREMA_CHECK(p.has_max()) << describe() << ": clip_param.max is required";
  CREMA_CHECK(!std::isnan(p.min())) << describe() << ": clip_param.min is NaN";
  CREMA_CHECK(!std::isnan(p.max())) << describe() << ": clip_param.max is NaN";
  CREMA_CHECK(p.min() <= p.max()) << describe() << ": clip_param.min (" << p.min()
                                  << ") is greater than clip_param.max (" << p.max() << ")";
  KeepInputWhenInPlace(bottom, top);
}

void ClipLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  ReshapeKeptInput(*bottom[0]);
}

void ClipLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  const ClipParameter& p = param_.clip_param();
  KeepInput(bottom);
  for_each_element(context(), top->count(), ClipForward{bottom.data_on(d), top->mutable_data_on(d), p.min(), p.max()});
}

void ClipLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const ClipParameter& p = param_.clip_param();
  const Blob& input = Input(*bottom);
  for_each_element(context(), bottom->count(),
                   ClipBackward{input.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d), p.min(), p.max()});
}

}  // namespace crema
