#include "layers/im2col.hpp"

#include <string>

#include "core/im2col.hpp"

namespace crema {

void Im2colLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) {
  const ConvolutionParameter& param = param_.convolution_param();
  const Blob& input = *bottom[0];
  channel_axis_ = CanonicalAxis(input, param.axis(), "convolution_param.axis");
  num_spatial_axes_ = input.num_axes() - channel_axis_ - 1;
  CREMA_CHECK(num_spatial_axes_ >= 1) << describe() << ": needs at least one spatial axis after the channel axis "
                                      << channel_axis_ << ", but the input has shape " << input.shape_string();
  geometry_ = ConvolutionGeometry(param, num_spatial_axes_, describe());
  use_2d_ = num_spatial_axes_ == 2 && !param.force_nd_im2col();
}

void Im2colLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() == channel_axis_ + 1 + num_spatial_axes_)
      << describe() << ": input shape " << input.shape_string() << " has " << input.num_axes()
      << " axes, but the layer was set up for " << channel_axis_ + 1 + num_spatial_axes_;
  num_ = input.count(0, channel_axis_);
  bottom_dim_ = input.count(channel_axis_);
  image_shape_ = {input.shape(channel_axis_)};
  column_shape_ = {input.shape(channel_axis_)};
  std::vector<int> top_shape(input.shape().begin(), input.shape().begin() + channel_axis_);
  top_shape.push_back(0);  // rows, set below
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int in = input.shape(channel_axis_ + 1 + i), extent = geometry_.extent(i);
    CREMA_CHECK(in + 2 * geometry_.pad[i] >= extent)
        << describe() << ": kernel_size " << geometry_.kernel[i] << " with dilation " << geometry_.dilation[i]
        << " spans more than the padded input along spatial axis " << i << " (input shape " << input.shape_string()
        << ")";
    const int out = (in + 2 * geometry_.pad[i] - extent) / geometry_.stride[i] + 1;
    image_shape_.push_back(in);
    column_shape_[0] *= geometry_.kernel[i];
    column_shape_.push_back(out);
    top_shape.push_back(out);
  }
  top_shape[channel_axis_] = column_shape_[0];
  top[0]->Reshape(top_shape);
  top_dim_ = top[0]->count(channel_axis_);
}

void Im2colLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const KernelGeometry& g = geometry_;
  for (int n = 0; n < num_; ++n) {
    const float* image = bottom[0]->cpu_data() + static_cast<size_t>(n) * bottom_dim_;
    float* columns = top[0]->mutable_cpu_data() + static_cast<size_t>(n) * top_dim_;
    if (use_2d_) {
      im2col_cpu(image, image_shape_[0], image_shape_[1], image_shape_[2], g.kernel[0], g.kernel[1], g.pad[0], g.pad[1],
                 g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], columns);
    } else {
      im2col_nd_cpu(image, num_spatial_axes_, image_shape_.data(), column_shape_.data(), g.kernel.data(), g.pad.data(),
                    g.stride.data(), g.dilation.data(), columns);
    }
  }
}

void Im2colLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const KernelGeometry& g = geometry_;
  for (int n = 0; n < num_; ++n) {
    const float* columns = top[0]->cpu_diff() + static_cast<size_t>(n) * top_dim_;
    float* image = bottom[0]->mutable_cpu_diff() + static_cast<size_t>(n) * bottom_dim_;
    if (use_2d_) {
      col2im_cpu(columns, image_shape_[0], image_shape_[1], image_shape_[2], g.kernel[0], g.kernel[1], g.pad[0],
                 g.pad[1], g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], image);
    } else {
      col2im_nd_cpu(columns, num_spatial_axes_, image_shape_.data(), column_shape_.data(), g.kernel.data(),
                    g.pad.data(), g.stride.data(), g.dilation.data(), image);
    }
  }
}

}  // namespace crema
