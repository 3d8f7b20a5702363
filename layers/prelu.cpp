#include "layers/prelu.hpp"

#include <algorithm>

#include "core/filler.hpp"

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
  if (!blobs_.empty()) {
    AdoptStoredParameters({slope_shape}, {"slopes"});
  } else {
    blobs_.push_back(std::make_shared<Blob>(slope_shape));
    if (param.has_filler()) {
      Fill(param.filler(), blobs_[0].get(), random());
    } else {
      blobs_[0]->set_data(0.25f);
    }
  }
  if (bottom[0] == top[0] && input_copy_ == nullptr) input_copy_ = AddInternalBlob("input");
}

void PReLULayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CheckShape(*bottom[0]);
  top[0]->ReshapeLike(*bottom[0]);
  if (input_copy_ != nullptr) input_copy_->ReshapeLike(*bottom[0]);
}

void PReLULayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  const int dim = bottom[0]->count(2);
  const int channels = bottom[0]->shape(1);
  const float* x = bottom[0]->cpu_data();
  if (input_copy_ != nullptr) std::copy(x, x + count, input_copy_->mutable_cpu_data());
  const float* slope = blobs_[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    const float a = slope[channel_shared_ ? 0 : (i / dim) % channels];
    y[i] = x[i] > 0.f ? x[i] : a * x[i];
  }
}

void PReLULayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const int count = bottom[0]->count();
  const int dim = bottom[0]->count(2);
  const int channels = bottom[0]->shape(1);
  const float* x = (input_copy_ != nullptr ? input_copy_ : bottom[0])->cpu_data();
  const float* dy = top[0]->cpu_diff();
  // The slopes' gradient first: in place, the bottom's diff below overwrites the top's.
  if (param_propagate_down(0)) {
    float* slope_diff = blobs_[0]->mutable_cpu_diff();
    for (int i = 0; i < count; ++i) {
      if (x[i] <= 0.f) slope_diff[channel_shared_ ? 0 : (i / dim) % channels] += dy[i] * x[i];
    }
  }
  if (propagate_down[0]) {
    const float* slope = blobs_[0]->cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();
    for (int i = 0; i < count; ++i) {
      const float a = slope[channel_shared_ ? 0 : (i / dim) % channels];
      dx[i] = x[i] > 0.f ? dy[i] : a * dy[i];
    }
  }
}

}  // namespace crema
