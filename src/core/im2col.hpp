// Unrolling image patches into columns (and back) so that convolution becomes one matrix product.
#pragma once

#include <cstddef>

namespace crema {

// image: channels x height x width.  columns: (channels * kernel_h * kernel_w) x (out_h * out_w), where
// out = (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1. Padding reads as zero.
// row_stride: the distance between consecutive rows of `columns` (0: out_h * out_w, rows packed), so that
// the column matrices of several images can sit side by side in one wider matrix (batched GEMM).
void im2col_cpu(const float* image, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* columns,
                size_t row_stride = 0);
// The adjoint of im2col: adds each column entry back into the image position it came from. The image is
// overwritten (zeroed first).
void col2im_cpu(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* image,
                size_t row_stride = 0);

// N spatial axes. image_shape and column_shape include the leading channel axis.
void im2col_nd_cpu(const float* image, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                   float* columns, size_t row_stride = 0);
void col2im_nd_cpu(const float* columns, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                   float* image, size_t row_stride = 0);

}  // namespace crema
