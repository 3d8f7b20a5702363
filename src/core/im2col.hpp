// Unrolling image patches into columns (and back) so that convolution becomes one matrix product.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/context.hpp"
#include "core/elementwise.hpp"

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
// col2im_cpu for a band of output rows [first_row, first_row + rows): `columns` holds only their columns (rows of
// rows x output width), added into `image` without zeroing it first (the caller zeroes it once, then folds band
// after band: the column gradient made a few rows at a time stays in the cache).
void col2im_band_cpu(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                     int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, int first_row, int rows,
                     float* image);

// N spatial axes. image_shape and column_shape include the leading channel axis.
void im2col_nd_cpu(const float* image, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation, float* columns,
                   size_t row_stride = 0);
void col2im_nd_cpu(const float* columns, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation, float* image,
                   size_t row_stride = 0);

// ---- On either device: the same unrolling as element rules (one thread per value), for the GPU ---------------
// The host loops above are tuned for caches; a GPU wants one thread per output value instead. The rules below
// are that form, written once: the GPU runs them as kernels, and the host tests run them too, against the loops
// above, so that the kernels' index arithmetic is checked on every machine.

constexpr int kMaxUnrollAxes = 6;

// One unrolling's geometry, by value (a kernel argument). Spatial axes only; the channel count apart.
struct UnrollGeometry {
  int num_axes = 0;
  int channels = 0;
  int image[kMaxUnrollAxes] = {};   // the image's spatial sizes
  int output[kMaxUnrollAxes] = {};  // the columns' spatial sizes (the convolution's output positions)
  int kernel[kMaxUnrollAxes] = {}, pad[kMaxUnrollAxes] = {}, stride[kMaxUnrollAxes] = {}, dilation[kMaxUnrollAxes] = {};
  int image_size = 1, output_size = 1, kernel_size = 1;  // products of the above
  long long row_stride = 0;                              // between rows of the columns (0 made output_size)
  bool host_2d = true;                                   // on the host, use im2col_cpu (not the N-d loops)
};

// From the arguments of im2col_nd_cpu (image_shape and column_shape with their leading channel/row axis).
// Throws when there are more than kMaxUnrollAxes spatial axes.
UnrollGeometry MakeUnrollGeometry(int num_spatial_axes, const int* image_shape, const int* column_shape,
                                  const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                                  size_t row_stride, bool host_2d);

// Column value i (row-major over rows = channel * kernel offset, then output positions), of float images or of 16-bit
// ones (float16 and bf16: a zero's bits are 0 in both, so padding is zero either way).
template <typename T>
struct Im2colRuleOf {
  const T* image;
  T* columns;
  UnrollGeometry g;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const int position = i % g.output_size;
    const int row = i / g.output_size;
    int offset = row % g.kernel_size;  // the kernel offset, last axis fastest
    const int channel = row / g.kernel_size;
    int rest = position;
    long long source = 0;
    bool inside = true;
    int place = 1;
    // Axis by axis from the last: output coordinate, kernel coordinate, input coordinate.
    for (int a = g.num_axes - 1; a >= 0; --a) {
      const int out = rest % g.output[a];
      rest /= g.output[a];
      const int k = offset % g.kernel[a];
      offset /= g.kernel[a];
      const int in = out * g.stride[a] - g.pad[a] + k * g.dilation[a];
      inside = inside && in >= 0 && in < g.image[a];
      source += static_cast<long long>(in) * place;
      place *= g.image[a];
    }
    columns[row * g.row_stride + position] =
        inside ? image[static_cast<long long>(channel) * g.image_size + source] : T(0);
  }
};
using Im2colRule = Im2colRuleOf<float>;

// Image value i (channel, then spatial, row-major): the sum of the column values unrolled from it, added in
// row order as col2im_cpu adds them, so both give the same floats.
struct Col2imRule {
  const float* columns;
  float* image;
  UnrollGeometry g;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const int channel = i / g.image_size;
    int coordinate[kMaxUnrollAxes];
    int rest = i % g.image_size;
    for (int a = g.num_axes - 1; a >= 0; --a) {
      coordinate[a] = rest % g.image[a];
      rest /= g.image[a];
    }
    float total = 0.f;
    for (int k = 0; k < g.kernel_size; ++k) {
      int offset = k;
      long long position = 0;
      int place = 1;
      bool hit = true;
      for (int a = g.num_axes - 1; a >= 0 && hit; --a) {
        const int kernel_coordinate = offset % g.kernel[a];
        offset /= g.kernel[a];
        const int shifted = coordinate[a] + g.pad[a] - kernel_coordinate * g.dilation[a];
        const int out = shifted >= 0 ? shifted / g.stride[a] : -1;
        hit = shifted >= 0 && out * g.stride[a] == shifted && out < g.output[a];
        position += static_cast<long long>(out) * place;
        place *= g.output[a];
      }
      if (hit) total += columns[(static_cast<long long>(channel) * g.kernel_size + k) * g.row_stride + position];
    }
    image[i] = total;
  }
};

// im2col and col2im on the context's device: the host loops above on the CPU, the rules on the GPU.
void im2col(Context& context, const float* image, const UnrollGeometry& g, float* columns);
// The same unrolling of an image of 16-bit values (the rule on either device).
void im2col(Context& context, const uint16_t* image, const UnrollGeometry& g, uint16_t* columns);
void col2im(Context& context, const float* columns, const UnrollGeometry& g, float* image);

}  // namespace crema
