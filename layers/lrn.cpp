#include "layers/lrn.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace crema {

void LRNLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadParameters();
  scale_ = AddInternalBlob("scale");
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

template <typename F>
void LRNLayer::ForEachNeighbour(int n, int c, int h, int w, F f) const {
  if (across_) {
    for (int cc = std::max(0, c - pre_); cc <= std::min(channels_ - 1, c + pre_); ++cc)
      f(((n * channels_ + cc) * height_ + h) * width_ + w);
  } else {
    for (int hh = std::max(0, h - pre_); hh <= std::min(height_ - 1, h + pre_); ++hh)
      for (int ww = std::max(0, w - pre_); ww <= std::min(width_ - 1, w + pre_); ++ww)
        f(((n * channels_ + c) * height_ + hh) * width_ + ww);
  }
}

void LRNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  float* scale = scale_->mutable_cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const float base = across_ ? k_ : 1.f;
  const float factor = across_ ? alpha_ / size_ : alpha_ / (size_ * size_);
  for (int n = 0; n < num_; ++n)
    for (int c = 0; c < channels_; ++c)
      for (int h = 0; h < height_; ++h)
        for (int w = 0; w < width_; ++w) {
          const int j = ((n * channels_ + c) * height_ + h) * width_ + w;
          float sum = 0.f;
          ForEachNeighbour(n, c, h, w, [&](int q) { sum += x[q] * x[q]; });
          scale[j] = base + factor * sum;
          y[j] = x[j] * std::pow(scale[j], -beta_);
        }
}

void LRNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  // dx_p = dy_p * scale_p^-beta - 2 * beta * factor * x_p * sum over q with p in window(q) of dy_q * y_q / scale_q;
  // the windows are symmetric, so those q are p's own neighbours.
  const float* x = bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  const float* scale = scale_->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const float factor = across_ ? alpha_ / size_ : alpha_ / (size_ * size_);
  // ratio_q = dy_q * y_q / scale_q = dy_q * x_q * scale_q^(-beta - 1), in the workspace.
  float* ratio = workspace();
  for (int q = 0; q < bottom[0]->count(); ++q) ratio[q] = dy[q] * x[q] * std::pow(scale[q], -beta_ - 1.f);
  for (int n = 0; n < num_; ++n)
    for (int c = 0; c < channels_; ++c)
      for (int h = 0; h < height_; ++h)
        for (int w = 0; w < width_; ++w) {
          const int j = ((n * channels_ + c) * height_ + h) * width_ + w;
          float sum = 0.f;
          ForEachNeighbour(n, c, h, w, [&](int q) { sum += ratio[q]; });
          dx[j] = dy[j] * std::pow(scale[j], -beta_) - 2.f * beta_ * factor * x[j] * sum;
        }
}

}  // namespace crema
