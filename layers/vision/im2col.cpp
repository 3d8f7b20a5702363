#include "layers/vision/im2col.hpp"

#include <glog/logging.h>

#include <vector>

#include "core/im2col.hpp"

namespace crema {

void Im2colLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) {
  const ConvolutionParameter& param = param_.convolution_param();
  const Blob& input = *bottom[0];
  channel_axis_ = CanonicalAxis(input, param.axis(), "convolution_param.axis");
  num_spatial_axes_ = input.num_axes() - channel_axis_ - 1;
  CREMA_CHECK(num_spatial_axes_ >= 1 && num_spatial_axes_ <= kMaxUnrollAxes)
      << describe() << ": needs 1 to " << kMaxUnrollAxes << " spatial axes after the channel axis " << channel_axis_
      << ", but the input has shape " << input.shape_string();
  geometry_ = ConvolutionGeometry(param, num_spatial_axes_, describe());
  use_2d_ = num_spatial_axes_ == 2 && !param.force_nd_im2col();
}

void Im2colLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() == channel_axis_ + 1 + num_spatial_axes_)
      << describe() << ": input shape " << input.shape_string() << " has " << input.num_axes()
      << " axes, but the layer was set up for " << channel_axis_ + 1 + num_spatial_axes_;
  // The batch's images one after another: one image of items x channels channels.
  std::vector<int> image_shape = {input.count(0, channel_axis_ + 1)};
  std::vector<int> column_shape = {input.shape(channel_axis_)};
  std::vector<int> top_shape(input.shape().begin(), input.shape().begin() + channel_axis_);
  top_shape.push_back(0);  // rows, set below
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int in = input.shape(channel_axis_ + 1 + i), extent = geometry_.extent(i);
    const int span = in + 2 * geometry_.pad[i] - extent, stride = geometry_.stride[i];
    // Caffe's rule (span / stride + 1, truncating toward zero) gives one output where the kernel reaches past the
    // padded input by less than a stride: the taps beyond read as zero.
    CREMA_CHECK(span > -stride)
        << describe() << ": kernel_size " << geometry_.kernel[i] << " with dilation " << geometry_.dilation[i]
        << " spans more than the padded input along spatial axis " << i << " by stride " << stride
        << " or more (input shape " << input.shape_string() << ")";
    if (span < 0 && !warned_kernel_beyond_input_) {
      warned_kernel_beyond_input_ = true;
      LOG(WARNING) << describe() << ": kernel_size " << geometry_.kernel[i] << " with dilation "
                   << geometry_.dilation[i] << " spans " << extent << " positions, more than the padded input "
                   << "along spatial axis " << i << " (" << in << " + 2 * pad " << geometry_.pad[i]
                   << "; input shape " << input.shape_string() << "): one output position, the taps beyond the "
                   << "input read as zero, as Caffe does";
    }
    const int out = span / stride + 1;
    image_shape.push_back(in);
    column_shape[0] *= geometry_.kernel[i];
    column_shape.push_back(out);
    top_shape.push_back(out);
  }
  top_shape[channel_axis_] = column_shape[0];
  top[0]->Reshape(top_shape);
  const KernelGeometry& g = geometry_;
  unroll_ = MakeUnrollGeometry(num_spatial_axes_, image_shape.data(), column_shape.data(), g.kernel.data(),
                               g.pad.data(), g.stride.data(), g.dilation.data(), 0, use_2d_);
}

void Im2colLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  im2col(context(), bottom[0]->data_on(d), unroll_, top[0]->mutable_data_on(d));
}

void Im2colLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  col2im(context(), top[0]->diff_on(d), unroll_, bottom[0]->mutable_diff_on(d));
}

}  // namespace crema
