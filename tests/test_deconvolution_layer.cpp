#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/vision/deconvolution.hpp"
#include "precision_cases.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Strides, pads and dilations of a transposed convolution, one value per spatial axis.
struct Geometry {
  std::vector<int> stride, pad, dilation;
  int group = 1;
};

// The transposed convolution written as a scatter: bottom value (n, c, position) adds weight (c, o, tap) times
// itself to top (n, output channel of o in c's group, position * stride - pad + tap * dilation), where that
// lies inside the top; the top starts from the bias.
std::vector<float> ScatterDeconvolution(const Blob& input, const Blob& weights, const Blob* bias, const Geometry& g,
                                        std::vector<int>* top_shape) {
  const int axes = input.num_axes() - 2;
  const int num = input.shape(0), channels = input.shape(1);
  const int group_outputs = weights.shape(1), outputs = group_outputs * g.group;
  const int group_channels = channels / g.group;
  std::vector<int> in(axes), kernel(axes), out(axes);
  int in_size = 1, out_size = 1, taps = 1;
  for (int a = 0; a < axes; ++a) {
    in[a] = input.shape(2 + a);
    kernel[a] = weights.shape(2 + a);
    out[a] = g.stride[a] * (in[a] - 1) + g.dilation[a] * (kernel[a] - 1) + 1 - 2 * g.pad[a];
    in_size *= in[a];
    out_size *= out[a];
    taps *= kernel[a];
  }
  *top_shape = {num, outputs};
  top_shape->insert(top_shape->end(), out.begin(), out.end());
  std::vector<double> top(static_cast<size_t>(num) * outputs * out_size, 0.0);
  for (int n = 0; n < num; ++n)
    for (int o = 0; o < outputs; ++o)
      for (int p = 0; p < out_size; ++p) top[(n * outputs + o) * out_size + p] = bias ? bias->cpu_data()[o] : 0.0;
  std::vector<int> position(axes), tap(axes);
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      const int first_output = (c / group_channels) * group_outputs;
      for (int p = 0; p < in_size; ++p) {
        for (int a = axes - 1, rest = p; a >= 0; --a) {
          position[a] = rest % in[a];
          rest /= in[a];
        }
        const double x = input.cpu_data()[(n * channels + c) * in_size + p];
        for (int t = 0; t < taps; ++t) {
          for (int a = axes - 1, rest = t; a >= 0; --a) {
            tap[a] = rest % kernel[a];
            rest /= kernel[a];
          }
          int target = 0;
          bool inside = true;
          for (int a = 0; a < axes; ++a) {
            const int y = position[a] * g.stride[a] - g.pad[a] + tap[a] * g.dilation[a];
            inside = inside && y >= 0 && y < out[a];
            target = target * out[a] + y;
          }
          if (!inside) continue;
          for (int o = 0; o < group_outputs; ++o) {
            const double w = weights.cpu_data()[(c * group_outputs + o) * taps + t];
            top[(n * outputs + first_output + o) * out_size + target] += w * x;
          }
        }
      }
    }
  }
  return std::vector<float>(top.begin(), top.end());
}

// Deconvolution's engines, in the registry's order (LayerRegistryTest.ConvolutionsEnginesInANet checks the
// list); every behaviour below is checked for each.
std::vector<std::string> Engines() { return LayerRegistry::Global().Engines("Deconvolution", Device::kCPU); }

// Whether `engine` takes this deconvolution: oneDNN's refuses all but 2-d ones over channel axis 1, and any
// other refusal fails the test.
bool Takes(const std::string& engine, const std::string& conv_param, const std::vector<int>& shape) {
  LayerParameter param =
      test::ParseLayer("name: 'up' type: 'Deconvolution' bottom: 'in' convolution_param { " + conv_param + " }");
  try {
    test::CreateWithEngine(param, {shape}, engine);
    return true;
  } catch (const Error& error) {
    EXPECT_EQ(engine, "onednn") << error.what();
    EXPECT_NE(shape.size(), 4u) << "a 2-d deconvolution refused: " << error.what();
    return false;
  }
}


// A layer of engine `engine`, chosen through the registry as a net would, with random weights and bias (the
// same for every engine).
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<Layer> layer;

  Fixture(const std::string& conv_param, const std::vector<std::vector<int>>& shapes,
          const std::string& engine = "native") {
    for (size_t i = 0; i < shapes.size(); ++i) {
      test::FillGaussian(bottom.Add(shapes[i]), 0.f, 1.f, 200 + i);
      top.Add({});
    }
    LayerParameter param =
        test::ParseLayer("name: 'up' type: 'Deconvolution' convolution_param { " + conv_param + " }");
    for (size_t i = 0; i < shapes.size(); ++i) param.add_bottom("in" + std::to_string(i));
    layer = test::CreateWithEngine(param, shapes, engine);
    EXPECT_EQ(layer->engine(), engine);
    layer->SetUp(bottom.pointers, top.pointers);
    for (size_t i = 0; i < layer->params().size(); ++i) test::FillGaussian(layer->params()[i].get(), 0.f, 1.f, 9 + i);
  }

  void ExpectMatchesScatter(const Geometry& geometry) {
    layer->Forward(bottom.pointers, top.pointers);
    const Blob* bias = layer->params().size() > 1 ? layer->params()[1].get() : nullptr;
    for (size_t i = 0; i < bottom.pointers.size(); ++i) {
      std::vector<int> shape;
      const std::vector<float> expected =
          ScatterDeconvolution(*bottom.pointers[i], *layer->params()[0], bias, geometry, &shape);
      ASSERT_EQ(top.pointers[i]->shape(), shape);
      for (int j = 0; j < top.pointers[i]->count(); ++j)
        ASSERT_NEAR(top.pointers[i]->cpu_data()[j], expected[j], 1e-4f) << "top " << i << " element " << j;
    }
  }
};

TEST(DeconvolutionLayerTest, ForwardMatchesTheScatterForm) {
  const struct {
    const char* param;
    std::vector<int> shape;
    Geometry geometry;
  } cases[] = {
      {"num_output: 3 kernel_size: 3", {2, 2, 4, 5}, {{1, 1}, {0, 0}, {1, 1}}},
      {"num_output: 2 kernel_size: 4 stride: 2 pad: 1", {2, 3, 3, 4}, {{2, 2}, {1, 1}, {1, 1}}},
      {"num_output: 4 kernel_size: 3 stride: 2 group: 2 dilation: 2", {1, 4, 3, 3}, {{2, 2}, {0, 0}, {2, 2}, 2}},
      {"num_output: 2 kernel_h: 2 kernel_w: 3 stride_h: 2 stride_w: 1 pad_w: 1 bias_term: false",
       {2, 2, 3, 3},
       {{2, 1}, {0, 1}, {1, 1}}},
      {"num_output: 3 kernel_size: 1 stride: 1", {2, 4, 3, 3}, {{1, 1}, {0, 0}, {1, 1}}},
      {"num_output: 2 kernel_size: 2 stride: 2 force_nd_im2col: true", {1, 2, 3, 2}, {{2, 2}, {0, 0}, {1, 1}}},
      {"num_output: 2 kernel_size: 3 stride: 2 pad: 1", {2, 2, 4}, {{2}, {1}, {1}}},
      {"num_output: 2 kernel_size: 2 stride: 2 kernel_size: 3 kernel_size: 2 stride: 1 stride: 2",
       {1, 2, 2, 3, 2},
       {{2, 1, 2}, {0, 0, 0}, {1, 1, 1}}},
  };
  for (const std::string& engine : Engines()) {
    for (const auto& c : cases) {
      SCOPED_TRACE(engine + ": " + c.param);
      if (!Takes(engine, c.param, c.shape)) continue;
      Fixture fixture(c.param, {c.shape}, engine);
      fixture.ExpectMatchesScatter(c.geometry);
    }
  }
}

// Random deconvolutions (test::RandomConvolutionCases: groups, odd and even channel counts, kernels 1 to 5, strides,
// pads, dilations, images from 1 x 1 to 30 x 30) on every other engine against the native one (im2col and GEMM,
// checked against the scatter form above): the output, the input gradient and the parameters' gradients for the same
// weights and output gradient. Comparing oneDNN's engine with a reference over such cases found faults of its kernels
// (KernelFault, layers/vision/onednn_convolution.cpp); the avx2. runs do the same with its AVX2 kernels.
TEST(DeconvolutionLayerTest, RandomDeconvolutionsAgreeWithTheNativeEngine) {
  for (const std::string& engine : Engines()) {
    if (engine == "native") continue;
    int compared = 0;
    for (const test::PrecisionCase& c : test::RandomConvolutionCases(true, 300, 37)) {
      SCOPED_TRACE(engine + ": " + c.text + " over " + ShapeString(c.shape));
      LayerParameter param = test::ParseLayer(c.text);
      param.add_bottom("in0");
      const std::vector<std::vector<int>> shapes = {c.shape};
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kCPU}).empty()) continue;
      const std::string conv_param = test::ConvolutionParamOf(c);
      Fixture native(conv_param, shapes, "native"), other(conv_param, shapes, engine);
      for (Fixture* f : {&native, &other}) {
        f->layer->Forward(f->bottom.pointers, f->top.pointers);
        Blob* top = f->top.pointers[0];
        Blob gradient(top->shape());
        test::FillGaussian(&gradient, 0.f, 1.f, 51);
        std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), top->mutable_cpu_diff());
        for (auto& blob : f->layer->params()) blob->set_diff(0.f);
        f->layer->Backward(f->top.pointers, {true}, f->bottom.pointers);
      }
      const auto expect_close = [](const std::vector<float>& actual, const std::vector<float>& expected,
                                   const std::string& what) {
        ASSERT_EQ(actual.size(), expected.size()) << what;
        for (size_t i = 0; i < actual.size(); ++i)
          ASSERT_NEAR(actual[i], expected[i], 1e-4f * (1.f + std::abs(expected[i]))) << what << " at " << i;
      };
      expect_close(test::DataOf(*other.top.pointers[0]), test::DataOf(*native.top.pointers[0]), "top data");
      expect_close(test::DiffOf(*other.bottom.pointers[0]), test::DiffOf(*native.bottom.pointers[0]), "bottom diff");
      for (size_t b = 0; b < other.layer->params().size(); ++b)
        expect_close(test::DiffOf(*other.layer->params()[b]), test::DiffOf(*native.layer->params()[b]),
                     "parameter diff " + std::to_string(b));
      ++compared;
    }
    EXPECT_GE(compared, 250) << engine;
  }
}

TEST(DeconvolutionLayerTest, SeveralBottomsShareTheWeights) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 3 kernel_size: 3 stride: 2 pad: 1", {{2, 2, 3, 4}, {2, 2, 3, 4}}, engine);
    fixture.ExpectMatchesScatter({{2, 2}, {1, 1}, {1, 1}});
  }
}

TEST(DeconvolutionLayerTest, WeightsHaveCaffesShapeAndTheShapeFollowsTheBottom) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 6 kernel_size: 3 stride: 2 group: 2", {{2, 4, 3, 3}}, engine);
    // (input channels, num_output / group, kernel...): Caffe's layout, so model-zoo weights load.
    EXPECT_EQ(fixture.layer->params()[0]->shape(), (std::vector<int>{4, 3, 3, 3}));
    EXPECT_EQ(fixture.layer->params()[1]->shape(), (std::vector<int>{6}));
    EXPECT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{2, 6, 7, 7}));
    fixture.ExpectMatchesScatter({{2, 2}, {0, 0}, {1, 1}, 2});
    fixture.bottom.pointers[0]->Reshape({1, 4, 5, 2});
    test::FillGaussian(fixture.bottom.pointers[0], 0.f, 1.f, 3);
    fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
    fixture.ExpectMatchesScatter({{2, 2}, {0, 0}, {1, 1}, 2});
  }
}

// Engines may keep the weights in their own layout from pass to pass (onednn::WeightCache): new weights
// written between passes, as an update or a weights file writes them, must give the new result. 16 channels
// in and 32 out, so that oneDNN reorders them into channel blocks.
TEST(DeconvolutionLayerTest, NewWeightsBetweenPassesAreUsed) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 32 kernel_size: 3 stride: 2 pad: 1", {{2, 16, 4, 3}}, engine);
    for (int round = 0; round < 3; ++round) {
      fixture.ExpectMatchesScatter({{2, 2}, {1, 1}, {1, 1}});
      test::FillGaussian(fixture.layer->params()[round % 2].get(), 0.f, 1.f, 77 + round);
    }
  }
}

// A bilinear-filled 4x4 kernel with stride 2 and pad 1 (FCN's upsampling) doubles the size, and a constant
// image stays constant away from the border.
TEST(DeconvolutionLayerTest, BilinearUpsamplingDoublesTheSize) {
  test::BlobList bottom, top;
  bottom.Add({1, 1, 4, 4})->set_data(3.f);
  top.Add({});
  DeconvolutionLayer layer(test::ParseLayer(
      "name: 'up' type: 'Deconvolution' convolution_param { num_output: 1 kernel_size: 4 stride: 2 pad: 1 "
      "bias_term: false weight_filler { type: 'bilinear' } }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{1, 1, 8, 8}));
  for (int h = 1; h < 7; ++h)
    for (int w = 1; w < 7; ++w) EXPECT_NEAR(top.pointers[0]->cpu_data()[h * 8 + w], 3.f, 1e-5f) << h << ", " << w;
}

TEST(DeconvolutionLayerTest, Gradients) {
  const std::pair<std::string, std::vector<std::vector<int>>> cases[] = {
      {"num_output: 2 kernel_size: 3 stride: 2 pad: 1", {{2, 2, 3, 3}}},
      {"num_output: 4 kernel_size: 2 stride: 1 dilation: 2 group: 2", {{1, 4, 3, 3}}},
      {"num_output: 2 kernel_size: 1", {{2, 3, 2, 3}, {2, 3, 2, 3}}},
      {"num_output: 2 kernel_size: 2 stride: 2 bias_term: false force_nd_im2col: true", {{1, 2, 2, 3}}},
  };
  for (const std::string& engine : Engines()) {
    for (const auto& c : cases) {
      SCOPED_TRACE(engine + ": " + c.first);
      Fixture fixture(c.first, c.second, engine);
      test::GradientChecker checker(1e-2f, 1e-3f);
      checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
    }
  }
}

TEST(DeconvolutionLayerTest, RejectsBadParametersAndShapes) {
  const auto set_up_error = [](const std::string& param, const std::vector<int>& shape) {
    test::BlobList bottom, top;
    bottom.Add(shape);
    top.Add({});
    DeconvolutionLayer layer(test::ParseLayer("name: 'up' type: 'Deconvolution' convolution_param { " + param + " }"));
    return test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  };
  std::string message = set_up_error("num_output: 2 kernel_size: 1 pad: 1", {1, 2, 1, 1});
  EXPECT_EQ(message.find("layer 'up' (Deconvolution)"), 0u) << message;
  EXPECT_NE(message.find("pad"), std::string::npos) << message;
  EXPECT_NE(message.find("1 2 1 1 (2)"), std::string::npos) << message;
  EXPECT_NE(set_up_error("num_output: 3 kernel_size: 2 group: 2", {1, 4, 3, 3}).find("num_output"), std::string::npos);
  EXPECT_NE(set_up_error("num_output: 2", {1, 4, 3, 3}).find("kernel_size"), std::string::npos);
}

#ifdef CREMA_USE_ONEDNN
// oneDNN's engine refuses strides above 8 (measured slower there); the registry then picks the native engine.
TEST(DeconvolutionLayerTest, LargeStridesGoToTheNativeEngine) {
  const auto engine_for = [](const std::string& conv_param) {
    LayerParameter param =
        test::ParseLayer("name: 'up' type: 'Deconvolution' bottom: 'in' convolution_param { " + conv_param + " }");
    return LayerRegistry::Global().Create(param, {{1, 21, 16, 16}}, std::make_shared<Context>())->engine();
  };
  EXPECT_EQ(engine_for("num_output: 21 kernel_size: 64 stride: 32"), "native");
  EXPECT_EQ(engine_for("num_output: 21 kernel_h: 4 kernel_w: 32 stride_h: 2 stride_w: 16"), "native");
  EXPECT_EQ(engine_for("num_output: 21 kernel_size: 16 stride: 8"), "onednn");
  test::ExpectErrorContaining([] { Fixture("num_output: 2 kernel_size: 32 stride: 16", {{1, 2, 3, 3}}, "onednn"); },
                              {"stride 16 is above 8", "slower"});
}
#endif

}  // namespace
}  // namespace crema
