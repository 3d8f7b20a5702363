// The layers the precision tests (test_precision, test_half_precision) compute in half precision against float32:
// a padded convolution, a strided grouped one, two 1x1 ones, two deconvolutions, and inner products plain and
// transposed, each with a bottom shape.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace crema {
namespace test {

inline constexpr char kPrecisionConvolution[] =
    "name: 'conv' type: 'Convolution' convolution_param { num_output: 24 kernel_size: 3 pad: 1 stride: 1 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
inline constexpr char kPrecisionStridedConvolution[] =
    "name: 'conv' type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 stride: 2 group: 2 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
// 48 inputs and 20 outputs: a bf16 copy of its weights written by crema (an inner product's layout) takes its vector
// loops for 32 inputs and 16 outputs and its element loop for the rest.
inline constexpr char kPrecisionPointwiseConvolution[] =
    "name: 'conv' type: 'Convolution' convolution_param { num_output: 20 kernel_size: 1 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
// An odd number of outputs over a 1x1 kernel: oneDNN 2.6's bf16 kernel for its input gradient over channels-last
// blobs (jit_bf16_1x1) reads the output gradient's channels in pairs and errs on such counts at some spatial sizes (5 x
// 6 among them); a deconvolution over an odd number of inputs runs that kernel forward.
inline constexpr char kPrecisionOddPointwiseConvolution[] =
    "name: 'conv' type: 'Convolution' convolution_param { num_output: 21 kernel_size: 1 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
inline constexpr char kPrecisionPointwiseDeconvolution[] =
    "name: 'deconv' type: 'Deconvolution' convolution_param { num_output: 5 kernel_size: 1 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
inline constexpr char kPrecisionDeconvolution[] =
    "name: 'deconv' type: 'Deconvolution' convolution_param { num_output: 8 kernel_size: 4 stride: 2 pad: 1 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
inline constexpr char kPrecisionInnerProduct[] =
    "name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 7 "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
inline constexpr char kPrecisionTransposedInnerProduct[] =
    "name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 5 transpose: true "
    "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";

struct PrecisionCase {
  std::string text;
  std::vector<int> shape;
};

// The convolutions with their bottoms' shapes, and the inner products with theirs.
inline const std::vector<PrecisionCase>& PrecisionConvolutionCases() {
  static const std::vector<PrecisionCase> cases = {
      {kPrecisionConvolution, {2, 16, 7, 6}},          {kPrecisionStridedConvolution, {2, 12, 9, 8}},
      {kPrecisionPointwiseConvolution, {2, 48, 3, 4}}, {kPrecisionOddPointwiseConvolution, {2, 32, 5, 6}},
      {kPrecisionDeconvolution, {2, 16, 5, 4}},        {kPrecisionPointwiseDeconvolution, {2, 3, 5, 6}}};
  return cases;
}
inline const std::vector<PrecisionCase>& PrecisionInnerProductCases() {
  static const std::vector<PrecisionCase> cases = {{kPrecisionInnerProduct, {3, 5, 4, 2}},
                                                   {kPrecisionTransposedInnerProduct, {4, 33}}};
  return cases;
}

// Convolutions (Deconvolutions where `transposed`) drawn at random from `seed`, with their bottoms' shapes: groups,
// channel counts odd and even, below, at and past a block of 16, kernels 1 to 5 (their height and width apart),
// strides, pads, dilations, and images from 1 x 1 to 30 x 30 (5 x 6 among them), each small enough for a direct
// reference (a few million products at most), and one oneDNN takes. Comparing oneDNN's engine with a reference over
// such cases found faults of oneDNN's kernels for some of them (KernelFault, layers/vision/onednn_convolution.cpp).
inline std::vector<PrecisionCase> RandomConvolutionCases(bool transposed, int count, uint32_t seed) {
  std::mt19937 random(seed);
  const auto pick = [&](std::initializer_list<int> values) {
    return *(values.begin() + static_cast<std::ptrdiff_t>(random() % values.size()));
  };
  std::vector<PrecisionCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    const int group = pick({1, 1, 1, 2, 3});
    const int channels = group * pick({1, 2, 3, 5, 8, 16, 17, 21}), outputs = group * pick({1, 2, 3, 5, 8, 16, 21, 33});
    const int kernel_h = pick({1, 1, 2, 3, 5}), kernel_w = pick({kernel_h, kernel_h, 1, 3});
    const int stride_h = pick({1, 1, 2, 3}), stride_w = pick({stride_h, 1, 2});
    const int dilation = pick({1, 1, 1, 2});
    const int extent_h = dilation * (kernel_h - 1) + 1, extent_w = dilation * (kernel_w - 1) + 1;
    const int pad_h = std::min(pick({0, 0, 1, 2}), extent_h - 1), pad_w = std::min(pick({pad_h, 0, 1}), extent_w - 1);
    const int num = pick({1, 2, 3}), height = pick({1, 2, 5, 6, 7, 9, 14, 30}), width = pick({height, 1, 3, 6, 8, 11});
    const bool bias = random() % 5 < 3;
    int out_h, out_w;
    if (transposed) {
      out_h = stride_h * (height - 1) + extent_h - 2 * pad_h;
      out_w = stride_w * (width - 1) + extent_w - 2 * pad_w;
    } else {
      if (extent_h > height + 2 * pad_h || extent_w > width + 2 * pad_w) continue;
      out_h = (height + 2 * pad_h - extent_h) / stride_h + 1;
      out_w = (width + 2 * pad_w - extent_w) / stride_w + 1;
    }
    if (out_h < 1 || out_w < 1) continue;
    const double products =
        static_cast<double>(num) * outputs * out_h * out_w * (channels / group) * kernel_h * kernel_w;
    if (products > 3e6) continue;
    cases.push_back({std::string("name: 'conv' type: '") + (transposed ? "Deconvolution" : "Convolution") +
                         "' convolution_param { num_output: " + std::to_string(outputs) +
                         " kernel_h: " + std::to_string(kernel_h) + " kernel_w: " + std::to_string(kernel_w) +
                         " stride_h: " + std::to_string(stride_h) + " stride_w: " + std::to_string(stride_w) +
                         " pad_h: " + std::to_string(pad_h) + " pad_w: " + std::to_string(pad_w) +
                         " dilation: " + std::to_string(dilation) + " group: " + std::to_string(group) +
                         " bias_term: " + (bias ? "true" : "false") +
                         " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }",
                     {num, channels, height, width}});
  }
  return cases;
}

// The fields of a case's convolution_param (the text between its braces), for the tests that build the layer from them.
inline std::string ConvolutionParamOf(const PrecisionCase& c) {
  const std::string open = "convolution_param { ";
  const size_t first = c.text.find(open) + open.size();
  return c.text.substr(first, c.text.rfind(" }") - first);
}

}  // namespace test
}  // namespace crema
