#include "layers/neuron/power.hpp"

#include "core/math_functions.hpp"

namespace crema {

void PowerLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const PowerParameter& param = param_.power_param();
  CREMA_CHECK(std::isfinite(param.power()))
      << describe() << ": power_param.power is " << param.power() << ", but must be finite";
  CREMA_CHECK(std::isfinite(param.scale()))
      << describe() << ": power_param.scale is " << param.scale() << ", but must be finite";
  CREMA_CHECK(std::isfinite(param.shift()))
      << describe() << ": power_param.shift is " << param.shift() << ", but must be finite";
  KeepInputWhenInPlace(bottom, top);
}

void PowerLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  ReshapeKeptInput(*bottom[0]);
}

void PowerLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  const PowerParameter& p = param_.power_param();
  KeepInput(bottom);
  for_each_element(context(), top->count(),
                   PowerForward{bottom.data_on(d), top->mutable_data_on(d), p.power(), p.scale(), p.shift()});
}

void PowerLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const PowerParameter& p = param_.power_param();
  const Blob& input = Input(*bottom);
  for_each_element(
      context(), bottom->count(),
      PowerBackward{input.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d), p.power(), p.scale(), p.shift()});
}

}  // namespace crema
