// Deconvolution (transposed convolution): the adjoint of Convolution with the same parameters. Each bottom
// value spreads, weighted by the kernel, over a kernel-sized window of the top, windows stride apart; so a
// Convolution with these parameters maps the top's shape back to the bottom's. Used for learned upsampling
// (fully convolutional nets), often with a fixed bilinear `weight_filler`.
//
// convolution_param as for Convolution (layers/vision/base_convolution.hpp): num_output (the top's channels),
// kernel_size, stride, pad, dilation (repeated or the 2-d forms), group, bias_term, weight_filler,
// bias_filler, axis, force_nd_im2col.
// Parameters: weights (channels, num_output / group, kernel...) as in Caffe, bias (num_output).
// Output size per spatial axis: stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad.
//
// Engine `im2col`: per image, the forward pass is Convolution's input-gradient step (a GEMM, then folding the
// columns into the top) and the backward pass is Convolution's forward and weight-gradient steps, all from
// BaseConvolutionLayer.
#pragma once

#include <vector>

#include "layers/vision/base_convolution.hpp"

namespace crema {

class DeconvolutionLayer : public BothDevices<BaseConvolutionLayer> {
 public:
  using BothDevices<BaseConvolutionLayer>::BothDevices;
  const char* type() const override { return "Deconvolution"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  bool reverse_dimensions() const override { return true; }
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace crema
