#include "layers/neuron/exp.hpp"

namespace crema {

void ExpLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ExpParameter& param = param_.exp_param();
  const float base = param.base();
  CREMA_CHECK(base == -1.f || base > 0.f)
      << describe() << ": exp_param.base is " << base << ", but must be -1 (for e) or positive";
  const double log_base = base == -1.f ? 1.0 : std::log(static_cast<double>(base));
  inner_ = static_cast<float>(log_base * param.scale());
  outer_ = param.shift() == 0.f ? 1.f : static_cast<float>(std::exp(log_base * param.shift()));
}

void ExpLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  for_each_element(context(), top->count(), ExpForward{bottom.data_on(d), top->mutable_data_on(d), inner_, outer_});
}

void ExpLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  for_each_element(context(), bottom->count(),
                   ExpBackward{top.data_on(d), top.diff_on(d), bottom->mutable_diff_on(d), inner_});
}

}  // namespace crema
