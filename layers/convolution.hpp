// Convolution: top = weights (*) bottom + bias, over any number of spatial axes, computed per image as
// one matrix product on the image's unrolled patches (im2col).
//
// convolution_param:
//   num_output            output channels (required)
//   kernel_size, stride, pad, dilation
//                         one value for every spatial axis, or one per axis; the 2-d forms kernel_h/kernel_w,
//                         stride_h/stride_w, pad_h/pad_w replace (and may not be mixed with) the repeated ones
//   group                 channels and outputs are split into this many independent groups
//   bias_term, weight_filler, bias_filler
//   axis                  the channel axis (default 1); the axes before it are batch axes, those after it
//                         spatial ones
//   force_nd_im2col       use the N-d unrolling even for 2-d input
// Several bottoms of one shape may be given: each gets its own top, all share the weights.
// Parameters: weights (num_output, channels / group, kernel...), bias (num_output).
// Output size per spatial axis: (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ConvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Convolution"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Image (channels x spatial) <-> its column matrix (channels * kernel x output positions).
  void Unroll(const float* image, float* columns) const;
  void Fold(const float* columns, float* image) const;

  int channel_axis_ = 1;
  int num_spatial_axes_ = 0;
  std::vector<int> kernel_, stride_, pad_, dilation_;
  int channels_ = 0, num_output_ = 0, group_ = 1;
  bool bias_term_ = true;
  bool use_2d_ = true;   // im2col_cpu rather than im2col_nd_cpu
  bool is_1x1_ = false;  // 1x1 kernel, stride 1, no pad: the image already is its column matrix

  // Per reshape.
  std::vector<int> image_shape_, column_shape_;  // with the leading channel axis, for the N-d unrolling
  int num_ = 0;                                  // images: the product of the axes before the channel axis
  int image_size_ = 0;                           // bottom values per image
  int output_spatial_size_ = 0;                  // output positions per image
  int kernel_dim_ = 0;                           // rows of one group's column matrix: channels / group * kernel
  // One image's column matrix (or its gradient) lives in the net's workspace.
};

}  // namespace crema
