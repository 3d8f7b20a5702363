// The window of the layers that slide a kernel over spatial axes (Convolution, Pooling, and later
// Deconvolution and Im2col): kernel, stride, pad and dilation, one value per spatial axis, read from Caffe's
// fields in one place, so every such layer accepts the same forms and names the same fields in its errors.
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

struct KernelGeometry {
  std::vector<int> kernel, stride, pad, dilation;

  int axes() const { return static_cast<int>(kernel.size()); }
  // Positions one kernel covers along spatial axis `axis`: dilation * (kernel - 1) + 1.
  int extent(int axis) const { return dilation[axis] * (kernel[axis] - 1) + 1; }
  // A 1x1 kernel with stride 1 and no padding: an image already is its own column matrix.
  bool pointwise() const;
};

// convolution_param for input with `spatial_axes` spatial axes. Each of the repeated kernel_size, stride, pad
// and dilation holds one value for every axis or one per axis; the 2-d forms kernel_h/kernel_w,
// stride_h/stride_w and pad_h/pad_w replace (and may not be mixed with) them. kernel_size is required;
// stride 1, pad 0 and dilation 1 by default. Errors begin with `layer` ("layer 'conv1' (Convolution)").
KernelGeometry ConvolutionGeometry(const ConvolutionParameter& param, int spatial_axes, const std::string& layer);

// pooling_param (2-d): kernel_size or kernel_h + kernel_w (neither under global_pooling, whose kernel is the
// whole input plane and is left 0 here), stride or stride_h + stride_w (default 1), pad or pad_h/pad_w
// (default 0); dilation is 1.
KernelGeometry PoolingGeometry(const PoolingParameter& param, const std::string& layer);

}  // namespace crema
