#include "layers/normalization/lrn.hpp"

#include <string>

#include "core/elementwise.hpp"

namespace crema {

void LRNLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadParameters();
  scale_ = AddInternalBlob("scale", InternalLifetime::kUntilBackward);
}

void LRNLayer::ReadParameters() {
  const LRNParameter& param = param_.lrn_param();
  const std::string me = describe();
  CREMA_CHECK(param.local_size() % 2 == 1)
      << me << ": lrn_param.local_size " << param.local_size() << " must be odd (the window is centred)";
  size_ = static_cast<int>(param.local_size());
  pre_ = (size_ - 1) / 2;
  alpha_ = param.alpha();
  beta_ = param.beta();
  k_ = param.k();
  across_ = param.norm_region() == LRNParameter::ACROSS_CHANNELS;
}

void LRNLayer::ReadShape(const Blob& input) {
  CREMA_CHECK(input.num_axes() == 4) << describe() << ": the input must be 4-d (num, channels, height, width), but "
                                     << "has shape " << input.shape_string();
  num_ = input.shape(0);
  channels_ = input.shape(1);
  height_ = input.shape(2);
  width_ = input.shape(3);
}

void LRNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  ReadShape(input);
  top[0]->ReshapeLike(input);
  scale_->ReshapeLike(input);
  RequestWorkspace(input.count());  // backward's dy * y / scale
}

void LRNLayer::ForwardByRules(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(context(), bottom[0]->count(),
                   LRNForwardRule{bottom[0]->data_on(d), scale_->mutable_data_on(d), top[0]->mutable_data_on(d),
                                  windows(), base(), factor(), beta_});
}

void LRNLayer::BackwardByRules(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  const int count = bottom[0]->count();
  const float* x = bottom[0]->data_on(d);
  const float* dy = top[0]->diff_on(d);
  const float* scale = scale_->data_on(d);
  float* ratio = workspace();
  for_each_element(context(), count, LRNRatioRule{x, dy, scale, ratio, beta_});
  for_each_element(context(), count,
                   LRNBackwardRule{x, dy, scale, ratio, bottom[0]->mutable_diff_on(d), windows(), factor(), beta_});
}

void LRNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRules(bottom, top);
}

void LRNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  BackwardByRules(top, propagate_down, bottom);
}

void LRNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRules(bottom, top);
}

void LRNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  BackwardByRules(top, propagate_down, bottom);
}

}  // namespace crema
