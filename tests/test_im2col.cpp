#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "core/elementwise.hpp"
#include "core/im2col.hpp"
#include "core/random.hpp"

namespace crema {
namespace {

std::vector<float> RandomValues(int n, uint64_t seed) {
  RandomStream random(seed);
  std::vector<float> values(n);
  for (auto& v : values) v = random.Gaussian(0.f, 1.f);
  return values;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

int OutputSize(int in, int kernel, int pad, int stride, int dilation) {
  return (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

// One 2-d unrolling problem.
struct Case2d {
  int channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int out_h() const { return OutputSize(height, kernel_h, pad_h, stride_h, dilation_h); }
  int out_w() const { return OutputSize(width, kernel_w, pad_w, stride_w, dilation_w); }
  int image_count() const { return channels * height * width; }
  int column_count() const { return channels * kernel_h * kernel_w * out_h() * out_w(); }
};

// Column (c, ky, kx), position (oy, ox) holds image[c][oy * stride - pad + ky * dilation][...], zero outside.
// With add=true the loops run backwards, scattering columns into the image (col2im).
void Reference2d(const Case2d& p, std::vector<float>* image, std::vector<float>* columns, bool add) {
  for (int c = 0; c < p.channels; ++c)
    for (int ky = 0; ky < p.kernel_h; ++ky)
      for (int kx = 0; kx < p.kernel_w; ++kx)
        for (int oy = 0; oy < p.out_h(); ++oy)
          for (int ox = 0; ox < p.out_w(); ++ox) {
            const int row = (c * p.kernel_h + ky) * p.kernel_w + kx;
            const int col = row * p.out_h() * p.out_w() + oy * p.out_w() + ox;
            const int y = oy * p.stride_h - p.pad_h + ky * p.dilation_h;
            const int x = ox * p.stride_w - p.pad_w + kx * p.dilation_w;
            const bool inside = y >= 0 && y < p.height && x >= 0 && x < p.width;
            const int pixel = (c * p.height + y) * p.width + x;
            if (add) {
              if (inside) (*image)[pixel] += (*columns)[col];
            } else {
              (*columns)[col] = inside ? (*image)[pixel] : 0.f;
            }
          }
}

const Case2d kCases2d[] = {
    {2, 5, 6, 3, 3, 0, 0, 1, 1, 1, 1},      // plain
    {3, 7, 6, 3, 3, 1, 1, 2, 2, 1, 1},      // pad and stride
    {2, 7, 8, 3, 2, 1, 0, 2, 1, 2, 3},      // rectangular, dilated, different per axis
    {1, 4, 4, 1, 1, 0, 0, 1, 1, 1, 1},      // 1x1
    {2, 5, 5, 5, 5, 2, 2, 3, 3, 1, 1},      // kernel as large as the image
    {2, 4, 3, 2, 2, 3, 3, 1, 1, 1, 1},      // pad wider than the kernel: whole rows of padding
    {1, 9, 10, 3, 3, 2, 2, 3, 3, 2, 2},     // stride 3 with pad and dilation: partly inside lines
    {3, 27, 25, 11, 11, 0, 0, 4, 4, 1, 1},  // CaffeNet's conv1 in small: a width not a whole number of strides
    {3, 14, 15, 7, 7, 3, 3, 2, 2, 1, 1},    // GoogLeNet's conv1 in small
    {2, 11, 17, 3, 4, 1, 5, 2, 3, 1, 2},    // stride 3 across with dilation 2, a pad wider than the stride
    {2, 4, 2, 2, 2, 0, 0, 3, 3, 1, 1},      // rows narrower than the stride: a phase without pixels
    {2, 3, 1, 3, 3, 1, 1, 3, 3, 1, 1},      // ... which a kernel column reaches (in the padding)
    {1, 3, 2, 3, 3, 1, 1, 4, 4, 1, 1},      // the same at stride 4
};

TEST(Im2colTest, TwoDimensionalMatchesReference) {
  for (const Case2d& p : kCases2d) {
    std::vector<float> image = RandomValues(p.image_count(), 1);
    std::vector<float> columns(p.column_count(), -7.f), expected(p.column_count());
    im2col_cpu(image.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, columns.data());
    Reference2d(p, &image, &expected, false);
    EXPECT_EQ(columns, expected) << "case with kernel " << p.kernel_h << "x" << p.kernel_w;
  }
}

TEST(Im2colTest, Col2imMatchesReferenceAndOverwrites) {
  for (const Case2d& p : kCases2d) {
    std::vector<float> columns = RandomValues(p.column_count(), 2);
    std::vector<float> image(p.image_count(), 5.f), expected(p.image_count(), 0.f);
    col2im_cpu(columns.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, image.data());
    Reference2d(p, &expected, &columns, true);
    for (int i = 0; i < p.image_count(); ++i) EXPECT_NEAR(image[i], expected[i], 1e-5f) << i;
  }
}

// Folding band by band (a few output rows' columns at a time, into an image zeroed once) gives the reference's sums
// in the reference's order within each band (kernel row, kernel column, then output position), bit for bit: every
// band's rows of the image reached, none past them (strides 2 to 4 take rows apart by phase, stride 1 line by line).
TEST(Im2colTest, Col2imInBandsAddsInTheReferencesOrder) {
  for (const Case2d& p : kCases2d) {
    const int positions = p.out_h() * p.out_w(), rows = p.column_count() / positions;
    const std::vector<float> columns = RandomValues(p.column_count(), 5);
    for (int band_rows = 1; band_rows <= p.out_h(); ++band_rows) {
      SCOPED_TRACE("kernel " + std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " stride " +
                   std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + ", bands of " +
                   std::to_string(band_rows) + " rows");
      std::vector<float> image(p.image_count(), 0.f), expected(p.image_count(), 0.f);
      for (int first = 0; first < p.out_h(); first += band_rows) {
        const int band_h = std::min(band_rows, p.out_h() - first);
        // The band's columns: each row's positions of output rows [first, first + band_h), packed.
        std::vector<float> band(static_cast<size_t>(rows) * band_h * p.out_w());
        for (int row = 0; row < rows; ++row)
          std::copy_n(columns.begin() + row * positions + first * p.out_w(), band_h * p.out_w(),
                      band.begin() + static_cast<size_t>(row) * band_h * p.out_w());
        col2im_band_cpu(band.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w,
                        p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, first, band_h, image.data());
        // The reference's loops over this band's output rows.
        for (int row = 0; row < rows; ++row) {
          const int c = row / (p.kernel_h * p.kernel_w), ky = row / p.kernel_w % p.kernel_h, kx = row % p.kernel_w;
          for (int oy = first; oy < first + band_h; ++oy)
            for (int ox = 0; ox < p.out_w(); ++ox) {
              const int y = oy * p.stride_h - p.pad_h + ky * p.dilation_h;
              const int x = ox * p.stride_w - p.pad_w + kx * p.dilation_w;
              if (y >= 0 && y < p.height && x >= 0 && x < p.width)
                expected[(c * p.height + y) * p.width + x] += columns[row * positions + oy * p.out_w() + ox];
            }
        }
      }
      for (int i = 0; i < p.image_count(); ++i) ASSERT_EQ(image[i], expected[i]) << "pixel " << i;
    }
  }
}

TEST(Im2colTest, Col2imIsTheAdjointOfIm2col) {
  for (const Case2d& p : kCases2d) {
    const std::vector<float> x = RandomValues(p.image_count(), 3);
    const std::vector<float> y = RandomValues(p.column_count(), 4);
    std::vector<float> unrolled(p.column_count()), folded(p.image_count());
    im2col_cpu(x.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, unrolled.data());
    col2im_cpu(y.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, folded.data());
    EXPECT_NEAR(Dot(unrolled, y), Dot(x, folded), 1e-4);
  }
}

// Two images unrolled side by side into one matrix (row_stride = twice the positions) give each image's packed
// column matrix in their halves of every row, and fold back from there to the same images.
TEST(Im2colTest, ARowStrideLaysImagesSideBySide) {
  for (const Case2d& p : kCases2d) {
    const int positions = p.out_h() * p.out_w(), rows = p.column_count() / positions;
    const std::vector<float> first = RandomValues(p.image_count(), 10), second = RandomValues(p.image_count(), 11);
    std::vector<float> packed_first(p.column_count()), packed_second(p.column_count());
    std::vector<float> wide(2 * p.column_count(), -7.f);
    const auto unroll = [&](const std::vector<float>& image, float* columns, size_t row_stride) {
      im2col_cpu(image.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
                 p.stride_w, p.dilation_h, p.dilation_w, columns, row_stride);
    };
    unroll(first, packed_first.data(), 0);
    unroll(second, packed_second.data(), 0);
    unroll(first, wide.data(), 2 * positions);
    unroll(second, wide.data() + positions, 2 * positions);
    for (int row = 0; row < rows; ++row)
      for (int i = 0; i < positions; ++i) {
        ASSERT_EQ(wide[2 * row * positions + i], packed_first[row * positions + i]) << row << " " << i;
        ASSERT_EQ(wide[(2 * row + 1) * positions + i], packed_second[row * positions + i]) << row << " " << i;
      }
    std::vector<float> folded(p.image_count()), expected(p.image_count());
    const std::vector<float> gradient = RandomValues(2 * p.column_count(), 12);
    std::vector<float> second_half(p.column_count());
    for (int row = 0; row < rows; ++row)
      std::copy_n(gradient.begin() + (2 * row + 1) * positions, positions, second_half.begin() + row * positions);
    col2im_cpu(gradient.data() + positions, p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w,
               p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, folded.data(), 2 * positions);
    col2im_cpu(second_half.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, expected.data());
    EXPECT_EQ(folded, expected);
  }
}

// An N-d problem, shapes in the layout im2col_nd_cpu takes (leading channel axis).
struct CaseNd {
  std::vector<int> image_shape, kernel, pad, stride, dilation;
  int axes() const { return static_cast<int>(kernel.size()); }
  std::vector<int> column_shape() const {
    std::vector<int> shape = {image_shape[0]};
    for (int i = 0; i < axes(); ++i) {
      shape[0] *= kernel[i];
      shape.push_back(OutputSize(image_shape[i + 1], kernel[i], pad[i], stride[i], dilation[i]));
    }
    return shape;
  }
  static int Product(const std::vector<int>& v) {
    int n = 1;
    for (int d : v) n *= d;
    return n;
  }
  int image_count() const { return Product(image_shape); }
  int column_count() const { return Product(column_shape()); }
  void Unroll(const float* image, float* columns) const {
    im2col_nd_cpu(image, axes(), image_shape.data(), column_shape().data(), kernel.data(), pad.data(), stride.data(),
                  dilation.data(), columns);
  }
  void Fold(const float* columns, float* image) const {
    col2im_nd_cpu(columns, axes(), image_shape.data(), column_shape().data(), kernel.data(), pad.data(), stride.data(),
                  dilation.data(), image);
  }
};

// A 3-d unrolling written out as plain loops.
std::vector<float> Reference3d(const CaseNd& p, const std::vector<float>& image) {
  const std::vector<int> cs = p.column_shape();
  const int C = p.image_shape[0], D = p.image_shape[1], H = p.image_shape[2], W = p.image_shape[3];
  std::vector<float> columns(p.column_count());
  int index = 0;
  for (int c = 0; c < C; ++c)
    for (int kd = 0; kd < p.kernel[0]; ++kd)
      for (int kh = 0; kh < p.kernel[1]; ++kh)
        for (int kw = 0; kw < p.kernel[2]; ++kw)
          for (int od = 0; od < cs[1]; ++od)
            for (int oh = 0; oh < cs[2]; ++oh)
              for (int ow = 0; ow < cs[3]; ++ow) {
                const int d = od * p.stride[0] - p.pad[0] + kd * p.dilation[0];
                const int h = oh * p.stride[1] - p.pad[1] + kh * p.dilation[1];
                const int w = ow * p.stride[2] - p.pad[2] + kw * p.dilation[2];
                const bool inside = d >= 0 && d < D && h >= 0 && h < H && w >= 0 && w < W;
                columns[index++] = inside ? image[((c * D + d) * H + h) * W + w] : 0.f;
              }
  return columns;
}

const CaseNd kCases3d[] = {
    {{2, 4, 5, 3}, {3, 2, 2}, {1, 0, 1}, {2, 1, 1}, {1, 2, 1}},
    {{1, 3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}},
    {{3, 5, 4, 6}, {2, 3, 3}, {0, 1, 2}, {1, 2, 3}, {2, 1, 1}},
};

TEST(Im2colTest, ThreeDimensionalMatchesReference) {
  for (const CaseNd& p : kCases3d) {
    const std::vector<float> image = RandomValues(p.image_count(), 5);
    std::vector<float> columns(p.column_count(), -7.f);
    p.Unroll(image.data(), columns.data());
    EXPECT_EQ(columns, Reference3d(p, image));
  }
}

TEST(Im2colTest, NdIsTheAdjointPair) {
  std::vector<CaseNd> cases(std::begin(kCases3d), std::end(kCases3d));
  cases.push_back({{2, 9}, {3}, {1}, {2}, {2}});                                               // 1-d
  cases.push_back({{2, 3, 4, 3, 2}, {2, 1, 2, 1}, {1, 0, 0, 1}, {1, 2, 1, 1}, {1, 1, 1, 2}});  // 4-d
  for (const CaseNd& p : cases) {
    const std::vector<float> x = RandomValues(p.image_count(), 6);
    const std::vector<float> y = RandomValues(p.column_count(), 7);
    std::vector<float> unrolled(p.column_count()), folded(p.image_count(), 3.f);
    p.Unroll(x.data(), unrolled.data());
    p.Fold(y.data(), folded.data());
    EXPECT_NEAR(Dot(unrolled, y), Dot(x, folded), 1e-4) << p.axes() << "-d case";
  }
}

TEST(Im2colTest, NdAgreesWithTwoDimensionalPath) {
  for (const Case2d& p : kCases2d) {
    const CaseNd nd{{p.channels, p.height, p.width},
                    {p.kernel_h, p.kernel_w},
                    {p.pad_h, p.pad_w},
                    {p.stride_h, p.stride_w},
                    {p.dilation_h, p.dilation_w}};
    const std::vector<float> image = RandomValues(p.image_count(), 8);
    std::vector<float> columns_2d(p.column_count()), columns_nd(p.column_count());
    im2col_cpu(image.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, columns_2d.data());
    nd.Unroll(image.data(), columns_nd.data());
    EXPECT_EQ(columns_2d, columns_nd);
    const std::vector<float> columns = RandomValues(p.column_count(), 9);
    std::vector<float> folded_2d(p.image_count()), folded_nd(p.image_count());
    col2im_cpu(columns.data(), p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
               p.stride_w, p.dilation_h, p.dilation_w, folded_2d.data());
    nd.Fold(columns.data(), folded_nd.data());
    for (int i = 0; i < p.image_count(); ++i) EXPECT_NEAR(folded_2d[i], folded_nd[i], 1e-5f) << i;
  }
}

// The GPU's unrolling rules (one thread per value) run here on the host, one call per index, against the host
// loops: their index arithmetic is checked on every machine, a GPU or not. Col2imRule adds in row order as the
// 2-d loop does, so it matches that one exactly.
TEST(Im2colTest, TheGpuRulesMatchTheHostLoops) {
  std::vector<CaseNd> cases(std::begin(kCases3d), std::end(kCases3d));
  for (const Case2d& p : kCases2d)
    cases.push_back({{p.channels, p.height, p.width},
                     {p.kernel_h, p.kernel_w},
                     {p.pad_h, p.pad_w},
                     {p.stride_h, p.stride_w},
                     {p.dilation_h, p.dilation_w}});
  cases.push_back({{2, 9}, {3}, {1}, {2}, {2}});                                               // 1-d
  cases.push_back({{2, 3, 4, 3, 2}, {2, 1, 2, 1}, {1, 0, 0, 1}, {1, 2, 1, 1}, {1, 1, 1, 2}});  // 4-d
  for (const CaseNd& p : cases) {
    SCOPED_TRACE(std::to_string(p.axes()) + "-d case, kernel " + std::to_string(p.kernel[0]));
    for (const size_t row_stride : {size_t{0}, size_t{1}}) {
      // row_stride 1 stands for "the positions plus a gap": rows then lie wider apart than packed.
      const std::vector<int> column_shape = p.column_shape();
      const int positions = p.column_count() / column_shape[0];
      const size_t stride = row_stride == 0 ? 0 : static_cast<size_t>(positions) + 3;
      const UnrollGeometry g = MakeUnrollGeometry(p.axes(), p.image_shape.data(), column_shape.data(), p.kernel.data(),
                                                  p.pad.data(), p.stride.data(), p.dilation.data(), stride, true);
      const size_t column_floats = static_cast<size_t>(column_shape[0]) * (stride == 0 ? positions : stride);
      const std::vector<float> image = RandomValues(p.image_count(), 10);
      std::vector<float> by_rule(column_floats, -7.f), by_loop(column_floats, -7.f);
      for_each_element(p.column_count(), Im2colRule{image.data(), by_rule.data(), g});
      if (p.axes() == 2) {
        im2col_cpu(image.data(), p.image_shape[0], p.image_shape[1], p.image_shape[2], p.kernel[0], p.kernel[1],
                   p.pad[0], p.pad[1], p.stride[0], p.stride[1], p.dilation[0], p.dilation[1], by_loop.data(), stride);
      } else {
        im2col_nd_cpu(image.data(), p.axes(), p.image_shape.data(), column_shape.data(), p.kernel.data(), p.pad.data(),
                      p.stride.data(), p.dilation.data(), by_loop.data(), stride);
      }
      EXPECT_EQ(by_rule, by_loop) << "row stride " << stride;

      const std::vector<float> columns = RandomValues(static_cast<int>(column_floats), 11);
      std::vector<float> folded_rule(p.image_count(), 5.f), folded_loop(p.image_count(), 5.f);
      for_each_element(p.image_count(), Col2imRule{columns.data(), folded_rule.data(), g});
      if (p.axes() == 2) {
        col2im_cpu(columns.data(), p.image_shape[0], p.image_shape[1], p.image_shape[2], p.kernel[0], p.kernel[1],
                   p.pad[0], p.pad[1], p.stride[0], p.stride[1], p.dilation[0], p.dilation[1], folded_loop.data(),
                   stride);
        EXPECT_EQ(folded_rule, folded_loop) << "row stride " << stride;
      } else {
        col2im_nd_cpu(columns.data(), p.axes(), p.image_shape.data(), column_shape.data(), p.kernel.data(),
                      p.pad.data(), p.stride.data(), p.dilation.data(), folded_loop.data(), stride);
        for (int i = 0; i < p.image_count(); ++i) EXPECT_NEAR(folded_rule[i], folded_loop[i], 1e-5f) << i;
      }
    }
  }
}

TEST(Im2colTest, MoreAxesThanTheRulesTakeIsAClearError) {
  const std::vector<int> shape(kMaxUnrollAxes + 2, 2), ones(kMaxUnrollAxes + 1, 1), zeros(kMaxUnrollAxes + 1, 0);
  try {
    MakeUnrollGeometry(kMaxUnrollAxes + 1, shape.data(), shape.data(), ones.data(), zeros.data(), ones.data(),
                       ones.data(), 0, false);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("spatial axes"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace crema
