#include "layers/neuron/log.hpp"

#include "core/math_functions.hpp"

namespace crema {

void LogLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float base = param_.log_param().base();
  CREMA_CHECK(base == -1.f || (base > 0.f && base != 1.f && std::isfinite(base)))
      << describe() << ": log_param.base is " << base << ", but must be -1 (for e) or positive and not 1";
  inv_log_base_ = base == -1.f ? 1.f : static_cast<float>(1.0 / std::log(static_cast<double>(base)));
  KeepInputWhenInPlace(bottom, top);
}

void LogLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  ReshapeKeptInput(*bottom[0]);
}

void LogLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  const LogParameter& p = param_.log_param();
  KeepInput(bottom);
  for_each_element(context(), top->count(),
                   LogForward{bottom.data_on(d), top->mutable_data_on(d), p.scale(), p.shift(), inv_log_base_});
}

void LogLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const LogParameter& p = param_.log_param();
  const Blob& input = Input(*bottom);
  for_each_element(
      context(), bottom->count(),
      LogBackward{input.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d), p.scale(), p.shift(), inv_log_base_});
}

}  // namespace crema
