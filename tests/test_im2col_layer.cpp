#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/elementwise.hpp"
#include "core/im2col.hpp"
#include "layers/vision/im2col.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<Im2colLayer> layer;
  Fixture(const std::string& param, const std::vector<int>& shape) {
    test::FillGaussian(bottom.Add(shape), 0.f, 1.f, 21);
    top.Add({});
    layer = std::make_unique<Im2colLayer>(
        test::ParseLayer("name: 'cols' type: 'Im2col' convolution_param { " + param + " }"));
    layer->SetUp(bottom.pointers, top.pointers);
  }
};

// Row (c, kh, kw), column (oh, ow) holds input (c, oh * stride - pad + kh * dilation, ...), or 0 outside.
TEST(Im2colLayerTest, ColumnsHoldWhatEachTapSees) {
  const int stride = 2, pad = 1, dilation = 2, kernel = 2;
  Fixture fixture("kernel_size: 2 stride: 2 pad: 1 dilation: 2", {2, 3, 5, 6});
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  const int out_h = (5 + 2 - 3) / 2 + 1, out_w = (6 + 2 - 3) / 2 + 1;
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{2, 12, out_h, out_w}));
  const float* x = fixture.bottom.pointers[0]->cpu_data();
  const float* y = fixture.top.pointers[0]->cpu_data();
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int kh = 0; kh < kernel; ++kh)
        for (int kw = 0; kw < kernel; ++kw)
          for (int oh = 0; oh < out_h; ++oh)
            for (int ow = 0; ow < out_w; ++ow) {
              const int h = oh * stride - pad + kh * dilation, w = ow * stride - pad + kw * dilation;
              const float expected = h >= 0 && h < 5 && w >= 0 && w < 6 ? x[((n * 3 + c) * 5 + h) * 6 + w] : 0.f;
              const int row = (c * kernel + kh) * kernel + kw;
              ASSERT_EQ(y[((n * 12 + row) * out_h + oh) * out_w + ow], expected);
            }
}

// The N-d unrolling gives the same columns as the 2-d one, and a 1-d input works.
TEST(Im2colLayerTest, NdUnrollingAgreesAndOneSpatialAxisWorks) {
  Fixture plain("kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 pad_h: 1", {1, 2, 4, 5});
  Fixture nd("kernel_size: 3 kernel_size: 2 stride: 1 stride: 2 pad: 1 pad: 0 force_nd_im2col: true", {1, 2, 4, 5});
  plain.layer->Forward(plain.bottom.pointers, plain.top.pointers);
  nd.layer->Forward(nd.bottom.pointers, nd.top.pointers);
  EXPECT_EQ(plain.top.pointers[0]->shape(), nd.top.pointers[0]->shape());
  EXPECT_EQ(test::DataOf(*plain.top.pointers[0]), test::DataOf(*nd.top.pointers[0]));
  Fixture line("kernel_size: 3 stride: 2", {2, 2, 7});
  EXPECT_EQ(line.top.pointers[0]->shape(), (std::vector<int>{2, 6, 3}));
}

TEST(Im2colLayerTest, Gradients) {
  for (const char* param : {"kernel_size: 3 stride: 2 pad: 1", "kernel_size: 2 dilation: 2 force_nd_im2col: true",
                            "kernel_size: 2 kernel_size: 2 kernel_size: 1 stride: 1"}) {
    SCOPED_TRACE(param);
    Fixture fixture(param, std::string(param).find("kernel_size: 1") != std::string::npos
                               ? std::vector<int>{1, 2, 3, 3, 2}
                               : std::vector<int>{2, 2, 5, 4});
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
  }
}

// On the GPU the layer unrolls the whole batch at once with core/im2col.hpp's rules (one image of items x channels
// channels); run on the host, those rules give the CPU's columns and gradients.
TEST(Im2colLayerTest, TheGpusBatchRulesMatchTheCpu) {
  const std::pair<const char*, std::vector<int>> cases[] = {
      {"kernel_size: 3 stride: 2 pad: 1", {2, 3, 7, 6}},
      {"kernel_size: 2 dilation: 2 force_nd_im2col: true", {3, 2, 5, 4}},
      {"kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 stride: 2", {2, 2, 4, 5, 3}},
      {"axis: 2 kernel_size: 3", {2, 2, 3, 9}},
  };
  for (const auto& [param, shape] : cases) {
    SCOPED_TRACE(param);
    Fixture fixture(param, shape);
    Blob* x = fixture.bottom.pointers[0];
    Blob* y = fixture.top.pointers[0];
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    test::FillGaussian(y, 0.f, 1.f, 22);  // the top's data as its gradient
    std::copy(y->cpu_data(), y->cpu_data() + y->count(), y->mutable_cpu_diff());
    fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);

    const UnrollGeometry& g = fixture.layer->unroll_geometry();
    std::vector<float> columns(y->count()), image(x->count());
    for_each_element(y->count(), Im2colRule{x->cpu_data(), columns.data(), g});
    EXPECT_EQ(columns, test::DataOf(*y));
    for_each_element(x->count(), Col2imRule{y->cpu_diff(), image.data(), g});
    EXPECT_EQ(image, test::DiffOf(*x));
  }
}

// A kernel reaching past the padded input by less than a stride gives one output position, as in Caffe, the taps
// beyond reading zero; one warning for the layer.
TEST(Im2colLayerTest, KernelBeyondThePaddedInputBySomeOfAStride) {
  test::LoggedWarnings warnings;
  Fixture fixture("kernel_size: 5 stride: 3 pad: 0", {1, 1, 4, 4});
  EXPECT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{1, 25, 1, 1}));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  const float* x = fixture.bottom.pointers[0]->cpu_data();
  const float* y = fixture.top.pointers[0]->cpu_data();
  for (int ky = 0; ky < 5; ++ky)
    for (int kx = 0; kx < 5; ++kx) EXPECT_EQ(y[ky * 5 + kx], ky < 4 && kx < 4 ? x[ky * 4 + kx] : 0.f);
  ASSERT_EQ(warnings.lines().size(), 1u);
  EXPECT_NE(warnings.lines()[0].find("as Caffe does"), std::string::npos) << warnings.lines()[0];
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
}

TEST(Im2colLayerTest, BadParametersAreNamed) {
  test::BlobList bottom, top;
  bottom.Add({1, 2, 4, 4});
  top.Add({});
  Im2colLayer no_kernel(test::ParseLayer("name: 'cols' type: 'Im2col' convolution_param { stride: 2 }"));
  test::ExpectErrorContaining([&] { no_kernel.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cols' (Im2col)", "kernel_size"});
  Im2colLayer too_big(test::ParseLayer("name: 'cols' type: 'Im2col' convolution_param { kernel_size: 5 }"));
  test::ExpectErrorContaining([&] { too_big.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'cols' (Im2col)", "kernel_size 5", "1 2 4 4 (32)"});
}

}  // namespace
}  // namespace crema
