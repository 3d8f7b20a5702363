#include "core/im2col.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/vector_clones.hpp"

namespace crema {

namespace {
inline int output_size(int in, int kernel, int pad, int stride, int dilation) {
  return (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

// The output positions ox in [first, last) whose input column x = ox * stride + offset lies inside [0, width).
inline void inside_range(int offset, int stride, int width, int out_w, int* first, int* last) {
  // ceil(-offset / stride) and floor((width - 1 - offset) / stride) + 1, for a positive stride.
  const int lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int hi = width - 1 - offset < 0 ? 0 : (width - 1 - offset) / stride + 1;
  *first = std::min(lo, out_w);
  *last = std::max(*first, std::min(hi, out_w));
}

// Visits every row of a 2-d unrolling (channel, kernel offset) and every output line oy of it in [first_row,
// last_row) (all of them where last_row < 0): line(out_row_offset, input_plane_line or nullptr for a padding line,
// x_offset), the column offsets counted from the band's first line.
template <typename Line>
void for_each_2d_line(int channels, int height, int width, int kernel_h, int kernel_w, int pad_h, int pad_w,
                      int stride_h, int stride_w, int dilation_h, int dilation_w, size_t row_stride, Line line,
                      int first_row = 0, int last_row = -1) {
  const int out_h = last_row < 0 ? output_size(height, kernel_h, pad_h, stride_h, dilation_h) : last_row;
  const int out_w = output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  const int rows = channels * kernel_h * kernel_w;
  for (int row = 0; row < rows; ++row) {
    const int c = row / (kernel_h * kernel_w);
    const int ky = (row / kernel_w) % kernel_h;
    const int kx = row % kernel_w;
    const int x_offset = kx * dilation_w - pad_w;
    int first = 0, last = 0;
    inside_range(x_offset, stride_w, width, out_w, &first, &last);
    const size_t plane = static_cast<size_t>(c) * height * width;
    for (int oy = first_row; oy < out_h; ++oy) {
      const int y = oy * stride_h - pad_h + ky * dilation_h;
      const bool inside = y >= 0 && y < height;
      line(row * row_stride + static_cast<size_t>(oy - first_row) * out_w,
           inside ? plane + static_cast<size_t>(y) * width : plane, inside, x_offset, first, last, out_w);
    }
  }
}
}  // namespace

namespace {
// A 2-d unrolling on the host, of float images or of 16-bit ones (a zero's bits are 0 in float16 and bf16 alike).
template <typename T>
void Im2col2d(const T* image, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h, int pad_w,
              int stride_h, int stride_w, int dilation_h, int dilation_w, T* columns, size_t row_stride) {
  if (row_stride == 0)
    row_stride = static_cast<size_t>(output_size(height, kernel_h, pad_h, stride_h, dilation_h)) *
                 output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  for_each_2d_line(channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h,
                   dilation_w, row_stride,
                   [&](size_t out_offset, size_t in_offset, bool inside, int x_offset, int first, int last, int out_w) {
                     T* out = columns + out_offset;
                     if (!inside) {
                       for (int ox = 0; ox < out_w; ++ox) out[ox] = T(0);
                       return;
                     }
                     // Input column x = ox * stride_w + x_offset, which is inside the line for ox in [first, last).
                     // Lines are short (8 to 60 floats in the usual nets): plain loops, not a library call each.
                     const T* in = image + in_offset;
                     for (int ox = 0; ox < first; ++ox) out[ox] = T(0);
                     if (stride_w == 1) {
                       const T* from = in + x_offset;
                       for (int ox = first; ox < last; ++ox) out[ox] = from[ox];
                     } else {
                       for (int ox = first; ox < last; ++ox) out[ox] = in[ox * stride_w + x_offset];
                     }
                     for (int ox = last; ox < out_w; ++ox) out[ox] = T(0);
                   });
}
}  // namespace

void im2col_cpu(const float* image, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* columns,
                size_t row_stride) {
  Im2col2d(image, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w,
           columns, row_stride);
}

namespace {
// fold_2d where the columns' x stride is above 1 (a strided convolution's input gradient: CaffeNet's conv1 at 4,
// GoogLeNet's at 2), where a column line's values land every stride-th pixel, one element at a time. Here each image
// row a band reaches is taken apart by phase (pixel x, with x + pad_w = stride * j + r, held as phase r's j-th value),
// so that a column line adds into one phase as one contiguous stretch (kernel column kx into phase (kx * dilation_w) %
// stride from value (kx * dilation_w) / stride on), in vectors, and then put back together. Each pixel receives its
// terms on top of the value it held in fold_2d's order (kernel row, then kernel column, ascending): the same sums,
// bit for bit, as the line-by-line fold and the GPU's rule.
// kPhases: the stride where the compiler is to know it (2 and 4, the usual strides: its loops over a row's phases
// then go in vectors), else 0 and `stride_w`.
template <int kPhases>
CREMA_ALWAYS_INLINE void FoldByPhases(const float* columns, int channels, int height, int width, int kernel_h,
                                      int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                                      int dilation_w, float* image, size_t row_stride, int first_row, int last_row) {
  const int phases = kPhases > 0 ? kPhases : stride_w;
  const int out_w = output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  // Phase r's values j: pixel x = phases * j + r - pad_w, and every place a column line reaches (beyond the row's ends
  // too, where the terms fall on padding and are dropped).
  const int length = std::max(out_w + dilation_w * (kernel_w - 1) / phases, (width - 1 + pad_w) / phases + 1);
  std::vector<float> by_phase(static_cast<size_t>(phases) * length, 0.f);
  float* const values = by_phase.data();
  // Phase r's pixels: its values [first[r], last[r]) (none where the row is narrower than the stride and its pad), the
  // first of them pixel x0[r].
  std::vector<int> first(phases), last(phases), x0(phases);
  for (int r = 0; r < phases; ++r) {
    inside_range(r - pad_w, phases, width, length, &first[r], &last[r]);
    x0[r] = phases * first[r] + r - pad_w;
  }
  const int top = std::max(0, first_row * stride_h - pad_h);
  const int bottom = std::min(height, (last_row - 1) * stride_h - pad_h + (kernel_h - 1) * dilation_h + 1);
  for (int c = 0; c < channels; ++c) {
    for (int y = top; y < bottom; ++y) {
      float* const row = image + (static_cast<size_t>(c) * height + y) * width;
      // Taken apart: the row's pixels into their phases, the places around them zero.
      for (int r = 0; r < phases; ++r) {
        float* const phase = values + r * length;
        for (int j = 0; j < first[r]; ++j) phase[j] = 0.f;
        for (int j = 0; j < last[r] - first[r]; ++j) phase[first[r] + j] = row[x0[r] + phases * j];
        for (int j = last[r]; j < length; ++j) phase[j] = 0.f;
      }
      for (int ky = 0; ky < kernel_h; ++ky) {
        const int t = y + pad_h - ky * dilation_h;  // oy * stride_h, where this kernel row reaches row y from oy
        if (t < 0 || t % stride_h != 0) continue;
        const int oy = t / stride_h;
        if (oy < first_row || oy >= last_row) continue;
        for (int kx = 0; kx < kernel_w; ++kx) {
          const int shift = kx * dilation_w;
          const float* __restrict in = columns + static_cast<size_t>((c * kernel_h + ky) * kernel_w + kx) * row_stride +
                                       static_cast<size_t>(oy - first_row) * out_w;
          float* __restrict out = values + (shift % phases) * length + shift / phases;
          for (int ox = 0; ox < out_w; ++ox) out[ox] += in[ox];
        }
      }
      for (int r = 0; r < phases; ++r) {
        const float* const phase = values + r * length;
        for (int j = 0; j < last[r] - first[r]; ++j) row[x0[r] + phases * j] = phase[first[r] + j];
      }
    }
  }
}

CREMA_VECTOR_CLONES void fold_2d_by_phases(const float* columns, int channels, int height, int width, int kernel_h,
                                           int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w,
                                           int dilation_h, int dilation_w, float* image, size_t row_stride,
                                           int first_row, int last_row) {
  switch (stride_w) {
    case 2:
      FoldByPhases<2>(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w,
                      dilation_h, dilation_w, image, row_stride, first_row, last_row);
      return;
    case 4:
      FoldByPhases<4>(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w,
                      dilation_h, dilation_w, image, row_stride, first_row, last_row);
      return;
    default:
      FoldByPhases<0>(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w,
                      dilation_h, dilation_w, image, row_stride, first_row, last_row);
  }
}

// Adds the columns of output rows [first_row, last_row) (all where last_row < 0) into the image.
void fold_2d(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
             int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* image, size_t row_stride,
             int first_row, int last_row) {
  if (stride_w > 1) {
    if (last_row < 0) last_row = output_size(height, kernel_h, pad_h, stride_h, dilation_h);
    if (first_row < last_row)
      fold_2d_by_phases(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w,
                        dilation_h, dilation_w, image, row_stride, first_row, last_row);
    return;
  }
  for_each_2d_line(
      channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, row_stride,
      [&](size_t in_offset, size_t out_offset, bool inside, int x_offset, int first, int last, int) {
        if (!inside) return;
        const float* in = columns + in_offset;
        float* out = image + out_offset;
        for (int ox = first; ox < last; ++ox) out[ox * stride_w + x_offset] += in[ox];
      },
      first_row, last_row);
}
}  // namespace

void col2im_cpu(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, float* image,
                size_t row_stride) {
  std::memset(image, 0, sizeof(float) * channels * height * width);
  if (row_stride == 0)
    row_stride = static_cast<size_t>(output_size(height, kernel_h, pad_h, stride_h, dilation_h)) *
                 output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  fold_2d(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h,
          dilation_w, image, row_stride, 0, -1);
}

void col2im_band_cpu(const float* columns, int channels, int height, int width, int kernel_h, int kernel_w, int pad_h,
                     int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w, int first_row, int rows,
                     float* image) {
  const size_t row_stride = static_cast<size_t>(rows) * output_size(width, kernel_w, pad_w, stride_w, dilation_w);
  fold_2d(columns, channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h,
          dilation_w, image, row_stride, first_row, first_row + rows);
}

namespace {
// Walks every (column row, output position) pair of an N-d unrolling and calls visit(column_index,
// image_index), image_index < 0 for padding.
template <typename Visit>
void for_each_nd_pair(int num_axes, const int* image_shape, const int* column_shape, const int* kernel_shape,
                      const int* pad, const int* stride, const int* dilation, size_t row_stride, Visit visit) {
  int kernel_size = 1;
  for (int i = 0; i < num_axes; ++i) kernel_size *= kernel_shape[i];
  const int rows = column_shape[0];
  int positions = 1;
  for (int i = 0; i < num_axes; ++i) positions *= column_shape[i + 1];
  if (row_stride == 0) row_stride = positions;
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
        const int coordinate = out_index[axis] * stride[axis] - pad[axis] + kernel_index[axis] * dilation[axis];
        if (coordinate < 0 || coordinate >= image_shape[axis + 1]) {
          inside = false;
          break;
        }
        image_index = image_index * image_shape[axis + 1] + coordinate;
      }
      visit(row * row_stride + position, inside ? image_index : -1);
    }
  }
}
}  // namespace

void im2col_nd_cpu(const float* image, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation, float* columns,
                   size_t row_stride) {
  for_each_nd_pair(num_spatial_axes, image_shape, column_shape, kernel_shape, pad, stride, dilation, row_stride,
                   [&](size_t column_index, int image_index) {
                     columns[column_index] = image_index >= 0 ? image[image_index] : 0.f;
                   });
}

void col2im_nd_cpu(const float* columns, int num_spatial_axes, const int* image_shape, const int* column_shape,
                   const int* kernel_shape, const int* pad, const int* stride, const int* dilation, float* image,
                   size_t row_stride) {
  int image_count = 1;
  for (int i = 0; i <= num_spatial_axes; ++i) image_count *= image_shape[i];
  std::memset(image, 0, sizeof(float) * image_count);
  for_each_nd_pair(num_spatial_axes, image_shape, column_shape, kernel_shape, pad, stride, dilation, row_stride,
                   [&](size_t column_index, int image_index) {
                     if (image_index >= 0) image[image_index] += columns[column_index];
                   });
}

UnrollGeometry MakeUnrollGeometry(int num_spatial_axes, const int* image_shape, const int* column_shape,
                                  const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                                  size_t row_stride, bool host_2d) {
  CREMA_CHECK(num_spatial_axes >= 1 && num_spatial_axes <= kMaxUnrollAxes)
      << "im2col handles 1 to " << kMaxUnrollAxes << " spatial axes, not " << num_spatial_axes;
  UnrollGeometry g;
  g.num_axes = num_spatial_axes;
  g.channels = image_shape[0];
  for (int a = 0; a < num_spatial_axes; ++a) {
    g.image[a] = image_shape[a + 1];
    g.output[a] = column_shape[a + 1];
    g.kernel[a] = kernel_shape[a];
    g.pad[a] = pad[a];
    g.stride[a] = stride[a];
    g.dilation[a] = dilation[a];
    g.image_size *= g.image[a];
    g.output_size *= g.output[a];
    g.kernel_size *= g.kernel[a];
  }
  g.row_stride = row_stride == 0 ? g.output_size : static_cast<long long>(row_stride);
  g.host_2d = host_2d && num_spatial_axes == 2;
  return g;
}

namespace {
// The host loops' arguments back from a geometry.
struct HostShapes {
  int image_shape[kMaxUnrollAxes + 1], column_shape[kMaxUnrollAxes + 1];
  explicit HostShapes(const UnrollGeometry& g) {
    image_shape[0] = g.channels;
    column_shape[0] = g.channels * g.kernel_size;
    for (int a = 0; a < g.num_axes; ++a) {
      image_shape[a + 1] = g.image[a];
      column_shape[a + 1] = g.output[a];
    }
  }
};
}  // namespace

void im2col(Context& context, const float* image, const UnrollGeometry& g, float* columns) {
  if (context.device() == Device::kGPU) {
    for_each_element(context, g.channels * g.kernel_size * g.output_size, Im2colRule{image, columns, g});
  } else if (g.host_2d) {
    im2col_cpu(image, g.channels, g.image[0], g.image[1], g.kernel[0], g.kernel[1], g.pad[0], g.pad[1], g.stride[0],
               g.stride[1], g.dilation[0], g.dilation[1], columns, g.row_stride);
  } else {
    const HostShapes shapes(g);
    im2col_nd_cpu(image, g.num_axes, shapes.image_shape, shapes.column_shape, g.kernel, g.pad, g.stride, g.dilation,
                  columns, g.row_stride);
  }
}

void im2col(Context& context, const uint16_t* image, const UnrollGeometry& g, uint16_t* columns) {
  // On the host (GPU code rehearsed there) a 2-d unrolling goes line by line, as the float one does: the rule's
  // divisions per value took a quarter of a half-precision LeNet's training.
  if (context.device() != Device::kGPU && g.host_2d) {
    Im2col2d(image, g.channels, g.image[0], g.image[1], g.kernel[0], g.kernel[1], g.pad[0], g.pad[1], g.stride[0],
             g.stride[1], g.dilation[0], g.dilation[1], columns, g.row_stride);
    return;
  }
  for_each_element(context, g.channels * g.kernel_size * g.output_size, Im2colRuleOf<uint16_t>{image, columns, g});
}

void col2im(Context& context, const float* columns, const UnrollGeometry& g, float* image) {
  if (context.device() == Device::kGPU) {
    for_each_element(context, g.channels * g.image_size, Col2imRule{columns, image, g});
  } else if (g.host_2d) {
    col2im_cpu(columns, g.channels, g.image[0], g.image[1], g.kernel[0], g.kernel[1], g.pad[0], g.pad[1], g.stride[0],
               g.stride[1], g.dilation[0], g.dilation[1], image, g.row_stride);
  } else {
    const HostShapes shapes(g);
    col2im_nd_cpu(columns, g.num_axes, shapes.image_shape, shapes.column_shape, g.kernel, g.pad, g.stride, g.dilation,
                  image, g.row_stride);
  }
}

}  // namespace crema
