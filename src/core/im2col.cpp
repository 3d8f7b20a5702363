#include "core/im2col.hpp"

#include <cstring>
#include <vector>

namespace crema {

namespace {
inline int output_size(int in, int kernel, int pad, int stride, int dilation) {
  return (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}
}  // namespace

void im2col_cpu(const float* image, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* columns) {
  const int out_h = output_size(height, kernel_h, pad_h, stride_h, dilation_h);
  const int out_w = output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  const int rows = channels * kernel_h * kernel_w;
  for (int row = 0; row < rows; ++row) {
    const int c = row / (kernel_h * kernel_w);
    const int ky = (row / kernel_w) % kernel_h;
    const int kx = row % kernel_w;
    const float* plane = image + static_cast<size_t>(c) * height * width;
    float* out = columns + static_cast<size_t>(row) * out_h * out_w;
    for (int oy = 0; oy < out_h; ++oy) {
      const int y = oy * stride_h - pad_h + ky * dilation_h;
      if (y < 0 || y >= height) {
        std::memset(out, 0, sizeof(float) * out_w);
        out += out_w;
        continue;
      }
      const float* line = plane + static_cast<size_t>(y) * width;
      for (int ox = 0; ox < out_w; ++ox) {
        const int x = ox * stride_w - pad_w + kx * dilation_w;
        *out++ = (x >= 0 && x < width) ? line[x] : 0.f;
      }
    }
  }
}

void col2im_cpu(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* image) {
  std::memset(image, 0, sizeof(float) * channels * height * width);
  const int out_h = output_size(height, kernel_h, pad_h, stride_h, dilation_h);
  const int out_w = output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  const int rows = channels * kernel_h * kernel_w;
  for (int row = 0; row < rows; ++row) {
    const int c = row / (kernel_h * kernel_w);
    const int ky = (row / kernel_w) % kernel_h;
    const int kx = row % kernel_w;
    float* plane = image + static_cast<size_t>(c) * height * width;
    const float* in = columns + static_cast<size_t>(row) * out_h * out_w;
    for (int oy = 0; oy < out_h; ++oy) {
      const int y = oy * stride_h - pad_h + ky * dilation_h;
      if (y < 0 || y >= height) {
        in += out_w;
        continue;
      }
      float* line = plane + static_cast<size_t>(y) * width;
      for (int ox = 0; ox < out_w; ++ox) {
        const int x = ox * stride_w - pad_w + kx * dilation_w;
        if (x >= 0 && x < width) line[x] += *in;
        ++in;
      }
    }
  }
}

namespace {
// Walks every (column row, output position) pair of an N-d unrolling and calls visit(column_index,
// image_index) for positions inside the image (image_index < 0 for padding).
template <typename Visit>
void for_each_nd_pair(int num_axes, const int* image_shape, const int* column_shape, const int* kernel_shape,
                      const int* pad, const int* stride, const int* dilation, Visit visit) {
  int kernel_size = 1;
  for (int i = 0; i < num_axes; ++i) kernel_size *= kernel_shape[i];
  const int rows = column_shape[0];
  int positions = 1;
  for (int i = 0; i < num_axes; ++i) positions *= column_shape[i + 1];
  std::vector<int> kernel_index(num_axes), out_index(num_axes);
  for (int row = 0; row < rows; ++row) {
    int remainder = row % kernel_size;
    for (int axis = num_axes - 1; axis >= 0; --axis) {
      kernel_index[axis] = remainder % kernel_shape[axis];
      remainder /= kernel_shape[axis];
    }
    const int channel = row / kernel_size;
    for (int position = 0; position < positions; ++position) {
      int rest = position;
      for (int axis = num_axes - 1; axis >= 0; --axis) {
        out_index[axis] = rest % column_shape[axis + 1];
        rest /= column_shape[axis + 1];
      }
      int image_index = channel;
      bool inside = true;
      for (int axis = 0; axis < num_axes; ++axis) {
        const int coordinate =
            out_index[axis] * stride[axis] - pad[axis] + kernel_index[axis] * dilation[axis];
        if (coordinate < 0 || coordinate >= image_shape[axis + 1]) {
          inside = false;
          break;
        }
        image_index = image_index * image_shape[axis + 1] + coordinate;
      }
      visit(row * positions + position, inside ? image_index : -1);
    }
  }
}
}  // namespace

void im2col_nd_cpu(const float* image, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                   float* columns) {
  for_each_nd_pair(num_spatial_axes, image_shape, column_shape, kernel_shape, pad, stride, dilation,
                   [&](int column_index, int image_index) {
                     columns[column_index] = image_index >= 0 ? image[image_index] : 0.f;
                   });
}

void col2im_nd_cpu(const float* columns, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                   float* image) {
  int image_count = 1;
  for (int i = 0; i <= num_spatial_axes; ++i) image_count *= image_shape[i];
  std::memset(image, 0, sizeof(float) * image_count);
  for_each_nd_pair(num_spatial_axes, image_shape, column_shape, kernel_shape, pad, stride, dilation,
                   [&](int column_index, int image_index) {
                     if (image_index >= 0) image[image_index] += columns[column_index];
                   });
}

}  // namespace crema
