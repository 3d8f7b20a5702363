#include "layers/neuron/prelu.hpp"

#include "core/elementwise.hpp"
#include "core/filler.hpp"
#include "core/math_functions.hpp"

namespace crema {

void PReLULayer::CheckShape(const Blob& bottom) const {
  CREMA_CHECK(bottom.num_axes() >= 2) << describe() << ": the bottom must have at least 2 axes (channels on axis 1), "
                                      << "but has shape " << bottom.shape_string();
  CREMA_CHECK(channel_shared_ || bottom.shape(1) == channels_)
      << describe() << ": the bottom has " << bottom.shape(1) << " channels (shape " << bottom.shape_string()
      << "), but the layer was set up with " << channels_ << " slopes";
}

void PReLULayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const PReLUParameter& param = param_.prelu_param();
  channel_shared_ = param.channel_shared();
  CREMA_CHECK(bottom[0]->num_axes() >= 2)
      << describe() << ": the bottom must have at least 2 axes (channels on axis 1), but has "
      << "shape " << bottom[0]->shape_string();
  channels_ = bottom[0]->shape(1);
  const std::vector<int> slope_shape{channel_shared_ ? 1 : channels_};
  if (!params_.empty()) {
    AdoptStoredParameters({slope_shape}, {"slopes"});
  } else {
    params_.push_back(std::make_shared<Blob>(slope_shape));
    if (param.has_filler()) {
      Fill(param.filler(), params_[0].get(), random());
    } else {
      params_[0]->set_data(0.25f);
    }
  }
  KeepInputWhenInPlace(bottom, top);
}

void PReLULayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& x = *bottom[0];
  CheckShape(x);
  top[0]->ReshapeLike(x);
  ReshapeKeptInput(x);
  // A shared slope is one channel of each item's values (so the sums' vector of ones is an item long, not the
  // whole bottom).
  geometry_ =
      channel_shared_ ? Broadcast{1, x.shape(0), 1, x.count(1)} : Broadcast{1, x.shape(0), channels_, x.count(2)};
  // The slope gradient's terms, then their sums over positions.
  RequestWorkspace(static_cast<size_t>(x.count()) + BroadcastSumScratch(geometry_));
}

void PReLULayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int count = bottom[0]->count();
  const float* x = bottom[0]->data_on(d);
  KeepInput(*bottom[0]);
  for_each_element(
      context(), count,
      PReLUForwardRule{x, params_[0]->data_on(d), top[0]->mutable_data_on(d), geometry_.dim, geometry_.inner});
}

void PReLULayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const Device d = device();
  const int count = bottom[0]->count();
  const float* x = Input(*bottom[0]).data_on(d);
  const float* dy = top[0]->diff_on(d);
  // The slopes' gradient first: in place, the bottom's diff below overwrites the top's.
  if (param_propagate_down(0)) {
    float* terms = workspace();
    for_each_element(context(), count, PReLUSlopeTermRule{x, dy, terms});
    BroadcastSum(context(), geometry_, 1.f, terms, 1.f, params_[0]->mutable_diff_on(d), terms + count);
  }
  if (propagate_down[0]) {
    for_each_element(context(), count,
                     PReLUBackwardRule{x, dy, params_[0]->data_on(d), bottom[0]->mutable_diff_on(d), geometry_.dim,
                                       geometry_.inner});
  }
}

}  // namespace crema
