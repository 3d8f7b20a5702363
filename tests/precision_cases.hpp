// The layers the precision tests (test_precision, test_half_precision) compute in half precision against float32:
// a padded convolution, a strided grouped one, two 1x1 ones, two deconvolutions, and inner products plain and
// transposed, each with a bottom shape.
#pragma once

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
  const char* text;
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

}  // namespace test
}  // namespace crema
