#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/vision/batched_convolution.hpp"
#include "layers/vision/convolution.hpp"
#include "precision_cases.hpp"
#include "test_util.hpp"

#ifdef CREMA_USE_ONEDNN
#include <dnnl.hpp>

#include "layers/onednn_util.hpp"
#include "layers/vision/onednn_convolution.hpp"
#endif

namespace crema {
namespace {

// Geometry of a reference convolution, one value per spatial axis.
struct Geometry {
  std::vector<int> pad, stride, dilation;
  int group = 1;
};

// Direct convolution of input (N, C, spatial...) with weights (O, C / group, kernel...): every output value
// is the sum over its group's channels and every kernel tap of weight * input, reading zero outside.
std::vector<float> ReferenceConvolution(const Blob& input, const Blob& weights, const Blob* bias, const Geometry& g,
                                        std::vector<int>* output_shape) {
  const int axes = input.num_axes() - 2;
  const int num = input.shape(0), channels = input.shape(1), outputs = weights.shape(0);
  const int group_channels = channels / g.group, group_outputs = outputs / g.group;
  std::vector<int> in(axes), kernel(axes), out(axes);
  int out_size = 1, kernel_size = 1;
  for (int a = 0; a < axes; ++a) {
    in[a] = input.shape(2 + a);
    kernel[a] = weights.shape(2 + a);
    out[a] = (in[a] + 2 * g.pad[a] - g.dilation[a] * (kernel[a] - 1) - 1) / g.stride[a] + 1;
    out_size *= out[a];
    kernel_size *= kernel[a];
  }
  *output_shape = {num, outputs};
  output_shape->insert(output_shape->end(), out.begin(), out.end());
  std::vector<float> result;
  std::vector<int> position(axes), tap(axes);
  for (int n = 0; n < num; ++n) {
    for (int o = 0; o < outputs; ++o) {
      for (int p = 0; p < out_size; ++p) {
        // Position p and tap t as multi-indices (last axis fastest).
        for (int a = axes - 1, rest = p; a >= 0; --a) {
          position[a] = rest % out[a];
          rest /= out[a];
        }
        double sum = bias ? bias->cpu_data()[o] : 0.0;
        for (int gc = 0; gc < group_channels; ++gc) {
          const int c = (o / group_outputs) * group_channels + gc;
          for (int t = 0; t < kernel_size; ++t) {
            for (int a = axes - 1, rest = t; a >= 0; --a) {
              tap[a] = rest % kernel[a];
              rest /= kernel[a];
            }
            int input_index = n * channels + c, weight_index = o * group_channels + gc;
            bool inside = true;
            for (int a = 0; a < axes; ++a) {
              const int x = position[a] * g.stride[a] - g.pad[a] + tap[a] * g.dilation[a];
              inside = inside && x >= 0 && x < in[a];
              input_index = input_index * in[a] + x;
              weight_index = weight_index * kernel[a] + tap[a];
            }
            if (inside) sum += static_cast<double>(weights.cpu_data()[weight_index]) * input.cpu_data()[input_index];
          }
        }
        result.push_back(static_cast<float>(sum));
      }
    }
  }
  return result;
}

// Convolution's engines, in the registry's order (LayerRegistryTest.ConvolutionsEnginesInANet checks the list);
// every behaviour below is checked for each.
std::vector<std::string> Engines() { return LayerRegistry::Global().Engines("Convolution", Device::kCPU); }

// Whether `engine` takes this convolution. Only oneDNN's engine refuses any (all but 2-d convolutions over
// channel axis 1); any other refusal fails the test.
bool Takes(const std::string& engine, const std::string& conv_param, const std::vector<std::vector<int>>& shapes) {
  LayerParameter param = test::ParseLayer("name: 'conv' type: 'Convolution' convolution_param { " + conv_param + " }");
  for (size_t i = 0; i < shapes.size(); ++i) param.add_bottom("in" + std::to_string(i));
  try {
    test::CreateWithEngine(param, shapes, engine);
    return true;
  } catch (const Error& error) {
    EXPECT_EQ(engine, "onednn") << error.what();
    EXPECT_NE(shapes[0].size(), 4u) << "a 2-d convolution refused: " << error.what();
    return false;
  }
}

// A layer of engine `engine` (chosen through the registry, as a net would) with its blobs; weights and bias get
// random values (the same for every engine).
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<Layer> layer;

  Fixture(const std::string& conv_param, const std::vector<std::vector<int>>& shapes,
          const std::string& engine = "native") {
    for (size_t i = 0; i < shapes.size(); ++i) {
      test::FillGaussian(bottom.Add(shapes[i]), 0.f, 1.f, 100 + i);
      top.Add({});
    }
    LayerParameter param =
        test::ParseLayer("name: 'conv' type: 'Convolution' convolution_param { " + conv_param + " }");
    for (size_t i = 0; i < shapes.size(); ++i) param.add_bottom("in" + std::to_string(i));
    layer = test::CreateWithEngine(param, shapes, engine);
    EXPECT_EQ(layer->engine(), engine);
    layer->SetUp(bottom.pointers, top.pointers);
    for (size_t i = 0; i < layer->params().size(); ++i) test::FillGaussian(layer->params()[i].get(), 0.f, 1.f, 7 + i);
  }
  const Blob* bias() const { return layer->params().size() > 1 ? layer->params()[1].get() : nullptr; }

  // Runs forward and compares every top with the direct convolution of its bottom.
  void ExpectMatchesReference(const Geometry& geometry) {
    layer->Forward(bottom.pointers, top.pointers);
    for (size_t i = 0; i < bottom.pointers.size(); ++i) {
      std::vector<int> shape;
      const std::vector<float> expected =
          ReferenceConvolution(*bottom.pointers[i], *layer->params()[0], bias(), geometry, &shape);
      ASSERT_EQ(top.pointers[i]->shape(), shape);
      for (int j = 0; j < top.pointers[i]->count(); ++j)
        ASSERT_NEAR(top.pointers[i]->cpu_data()[j], expected[j], 1e-4f) << "top " << i << " element " << j;
    }
  }
};

struct ForwardCase {
  const char* name;
  std::string param;
  std::vector<int> shape;
  Geometry geometry;
};

TEST(ConvolutionLayerTest, ForwardMatchesDirectConvolution) {
  const ForwardCase cases[] = {
      {"plain", "num_output: 4 kernel_size: 3", {2, 3, 6, 5}, {{0, 0}, {1, 1}, {1, 1}}},
      {"stride 2, pad 1", "num_output: 3 kernel_size: 3 stride: 2 pad: 1", {2, 3, 7, 6}, {{1, 1}, {2, 2}, {1, 1}}},
      {"dilation 2", "num_output: 2 kernel_size: 3 dilation: 2 pad: 1", {2, 2, 7, 8}, {{1, 1}, {1, 1}, {2, 2}}},
      {"group 2", "num_output: 6 kernel_size: 3 group: 2 pad: 1", {2, 4, 5, 5}, {{1, 1}, {1, 1}, {1, 1}, 2}},
      {"rectangular 2-d forms",
       "num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
       {2, 2, 7, 6},
       {{1, 0}, {2, 1}, {1, 1}}},
      {"per-axis repeated",
       "num_output: 2 kernel_size: 3 kernel_size: 1 stride: 1 stride: 2 pad: 0 pad: 1 "
       "dilation: 2 dilation: 1",
       {1, 3, 8, 7},
       {{0, 1}, {1, 2}, {2, 1}}},
      {"1x1 with groups", "num_output: 4 kernel_size: 1 group: 2", {3, 4, 3, 5}, {{0, 0}, {1, 1}, {1, 1}, 2}},
      {"1x1 strided", "num_output: 2 kernel_size: 1 stride: 2", {2, 3, 5, 5}, {{0, 0}, {2, 2}, {1, 1}}},
      {"no bias", "num_output: 3 kernel_size: 2 bias_term: false", {2, 2, 4, 4}, {{0, 0}, {1, 1}, {1, 1}}},
      {"forced N-d path",
       "num_output: 4 kernel_size: 3 stride: 2 pad: 1 dilation: 2 group: 2 force_nd_im2col: true",
       {2, 2, 9, 8},
       {{1, 1}, {2, 2}, {2, 2}, 2}},
      {"3-d",
       "num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 stride: 2 stride: 1 stride: 1 pad: 1 "
       "pad: 0 pad: 1 dilation: 1 dilation: 2 dilation: 1",
       {2, 2, 5, 5, 4},
       {{1, 0, 1}, {2, 1, 1}, {1, 2, 1}}},
      {"3-d grouped", "num_output: 4 kernel_size: 2 group: 2", {2, 4, 3, 4, 3}, {{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 2}},
      {"1-d", "num_output: 3 kernel_size: 3 stride: 2 pad: 1", {2, 2, 9}, {{1}, {2}, {1}}},
  };
  for (const std::string& engine : Engines()) {
    for (const ForwardCase& c : cases) {
      SCOPED_TRACE(engine + ": " + c.name);
      if (!Takes(engine, c.param, {c.shape})) continue;
      Fixture fixture(c.param, {c.shape}, engine);
      fixture.ExpectMatchesReference(c.geometry);
    }
  }
}

TEST(ConvolutionLayerTest, SeveralBottomsShareTheWeights) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 3 kernel_size: 3 stride: 2 pad: 1", {{2, 2, 5, 6}, {2, 2, 5, 6}}, engine);
    fixture.ExpectMatchesReference({{1, 1}, {2, 2}, {1, 1}});
  }
}

// Engines may keep the weights in their own layout from pass to pass (onednn::WeightCache): new weights
// written between passes, as an update or a weights file writes them, must give the new result. 16 channels
// in and 32 out, so that oneDNN reorders them into channel blocks.
TEST(ConvolutionLayerTest, NewWeightsBetweenPassesAreUsed) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 32 kernel_size: 3 pad: 1", {{2, 16, 5, 4}}, engine);
    for (int round = 0; round < 3; ++round) {
      fixture.ExpectMatchesReference({{1, 1}, {1, 1}, {1, 1}});
      test::FillGaussian(fixture.layer->params()[round % 2].get(), 0.f, 1.f, 77 + round);
    }
  }
}

// Engines may keep the memories bound to their buffers from pass to pass (onednn::Bindings): a bottom, top or
// weights whose storage moved between two passes of the same shapes (another memory plan, shared weights) must
// be read and written where it is now, not where it was.
TEST(ConvolutionLayerTest, BuffersThatMoveBetweenPassesAreFollowed) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 32 kernel_size: 3 pad: 1", {{2, 16, 5, 4}}, engine);
    fixture.ExpectMatchesReference({{1, 1}, {1, 1}, {1, 1}});
    // Every storage stays alive to the end, so that no new buffer can take a freed one's address.
    std::vector<std::unique_ptr<Blob>> storages;
    for (int round = 0; round < 2; ++round) {
      for (Blob* blob : {fixture.bottom.pointers[0], fixture.top.pointers[0], fixture.layer->params()[0].get()}) {
        storages.push_back(std::make_unique<Blob>(blob->shape()));
        storages.back()->ShareData(*blob);  // the old storage, kept
        auto moved = std::make_unique<Blob>(blob->shape());
        test::FillGaussian(moved.get(), 0.f, 1.f, 300 + static_cast<int>(storages.size()));
        const float* old = blob->cpu_data();
        blob->ShareData(*moved);
        ASSERT_NE(blob->cpu_data(), old);
        storages.push_back(std::move(moved));
      }
      fixture.ExpectMatchesReference({{1, 1}, {1, 1}, {1, 1}});
    }
  }
}

TEST(ConvolutionLayerTest, ReshapeFollowsBatchAndSpatialSizeChanges) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 3 kernel_size: 3 pad: 1", {{2, 2, 5, 5}}, engine);
    fixture.ExpectMatchesReference({{1, 1}, {1, 1}, {1, 1}});
    for (const std::vector<int>& shape : {std::vector<int>{5, 2, 5, 5}, {1, 2, 7, 4}, {3, 2, 4, 6}}) {
      fixture.bottom.pointers[0]->Reshape(shape);
      test::FillGaussian(fixture.bottom.pointers[0], 0.f, 1.f, shape[0]);
      fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
      fixture.ExpectMatchesReference({{1, 1}, {1, 1}, {1, 1}});
    }
  }
}

TEST(ConvolutionLayerTest, ChannelAxisOtherThanOne) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    if (engine == "onednn") {
      // oneDNN's engine takes NCHW only: it refuses, and a net's layer falls to the next engine.
      test::ExpectErrorContaining([] { Fixture("num_output: 2 kernel_size: 3 axis: 2", {{2, 3, 2, 4, 5}}, "onednn"); },
                                  {"cannot run it", "channel axis 2"});
      continue;
    }
    // With axis 2 the two leading axes are batch axes: the same as a batch of 2 * 3 images.
    Fixture fixture("num_output: 2 kernel_size: 3 pad: 1 axis: 2", {{2, 3, 2, 4, 5}}, engine);
    ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{2, 3, 2, 4, 5}));
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    Blob flat({6, 2, 4, 5});
    std::copy(fixture.bottom.pointers[0]->cpu_data(), fixture.bottom.pointers[0]->cpu_data() + flat.count(),
              flat.mutable_cpu_data());
    std::vector<int> shape;
    const std::vector<float> expected =
        ReferenceConvolution(flat, *fixture.layer->params()[0], fixture.bias(), {{1, 1}, {1, 1}, {1, 1}}, &shape);
    for (int j = 0; j < fixture.top.pointers[0]->count(); ++j)
      ASSERT_NEAR(fixture.top.pointers[0]->cpu_data()[j], expected[j], 1e-4f) << j;
  }
}

TEST(ConvolutionLayerTest, FillsParametersFromFillers) {
  test::BlobList bottom, top;
  bottom.Add({1, 4, 5, 5});
  top.Add({});
  ConvolutionLayer layer(test::ParseLayer(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 6 kernel_size: 3 kernel_size: 2 group: 2 "
      "weight_filler { type: 'constant' value: 0.5 } bias_filler { type: 'constant' value: -2 } }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.params().size(), 2u);
  EXPECT_EQ(layer.params()[0]->shape(), (std::vector<int>{6, 2, 3, 2}));
  EXPECT_EQ(layer.params()[1]->shape(), (std::vector<int>{6}));
  for (int i = 0; i < layer.params()[0]->count(); ++i) EXPECT_EQ(layer.params()[0]->cpu_data()[i], 0.5f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(layer.params()[1]->cpu_data()[i], -2.f);
}

TEST(ConvolutionLayerTest, KeepsParametersLoadedWithTheLayer) {
  test::BlobList bottom, top;
  bottom.Add({1, 2, 4, 4});
  top.Add({});
  LayerParameter param = test::ParseLayer(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 3 kernel_size: 2 "
      "weight_filler { type: 'gaussian' } }");
  Blob weights({3, 2, 2, 2}), bias({3});
  test::FillGaussian(&weights, 0.f, 1.f, 3);
  test::FillGaussian(&bias, 0.f, 1.f, 4);
  weights.ToProto(param.add_blobs());
  // A legacy file stores the bias as 4-d (1, 1, 1, 3).
  BlobProto* legacy_bias = param.add_blobs();
  legacy_bias->set_num(1);
  legacy_bias->set_channels(1);
  legacy_bias->set_height(1);
  legacy_bias->set_width(3);
  for (int i = 0; i < 3; ++i) legacy_bias->add_data(bias.cpu_data()[i]);
  ConvolutionLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  for (int i = 0; i < weights.count(); ++i) EXPECT_EQ(layer.params()[0]->cpu_data()[i], weights.cpu_data()[i]);
  EXPECT_EQ(layer.params()[1]->shape(), (std::vector<int>{3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(layer.params()[1]->cpu_data()[i], bias.cpu_data()[i]);

  // Weights stored for another kernel size are refused, naming both shapes.
  LayerParameter wrong = param;
  wrong.mutable_convolution_param()->set_kernel_size(0, 3);
  ConvolutionLayer mismatched(wrong);
  const std::string message = test::ErrorMessage([&] { mismatched.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("layer 'conv' (Convolution)"), std::string::npos) << message;
  EXPECT_NE(message.find("weights"), std::string::npos) << message;
  EXPECT_NE(message.find("3 2 2 2 (24)"), std::string::npos) << message;
  EXPECT_NE(message.find("3 2 3 3 (54)"), std::string::npos) << message;
  // And so is a missing bias.
  LayerParameter no_bias = param;
  no_bias.mutable_blobs()->RemoveLast();
  ConvolutionLayer missing(no_bias);
  EXPECT_NE(test::ErrorMessage([&] { missing.SetUp(bottom.pointers, top.pointers); }).find("bias_term"),
            std::string::npos);
}

TEST(ConvolutionLayerTest, Gradients) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    const std::pair<std::string, std::vector<std::vector<int>>> cases[] = {
        {"num_output: 3 kernel_size: 3 stride: 2 pad: 1", {{2, 2, 5, 5}}},
        {"num_output: 4 kernel_size: 3 dilation: 2 pad: 2 group: 2", {{2, 4, 5, 4}}},
        {"num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 pad_h: 0 pad_w: 1", {{2, 2, 5, 5}}},
        {"num_output: 4 kernel_size: 1 group: 2", {{2, 4, 3, 3}}},
        {"num_output: 2 kernel_size: 2 bias_term: false", {{1, 3, 4, 4}, {1, 3, 4, 4}}},
        {"num_output: 2 kernel_size: 2 stride: 2 pad: 1 dilation: 1 force_nd_im2col: true", {{2, 2, 4, 5}}},
        {"num_output: 2 kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 stride: 2 stride: 1 stride: 1",
         {{2, 2, 3, 4, 3}}},
    };
    for (const auto& c : cases) {
      SCOPED_TRACE(c.first);
      if (!Takes(engine, c.first, c.second)) continue;
      Fixture fixture(c.first, c.second, engine);
      test::GradientChecker checker(1e-2f, 1e-3f);
      checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
    }
  }
}

// A kernel reaching past the padded input by less than a stride: Caffe's rule, (in + 2 pad - extent) / stride + 1
// truncating toward zero, gives one output and the taps beyond read as zero. Every engine either runs it (matching
// the direct convolution, with a numeric gradient check) or refuses it (oneDNN), so that a net falls to im2col;
// one warning per layer. By a stride or more it stays an error.
TEST(ConvolutionLayerTest, KernelBeyondThePaddedInputBySomeOfAStride) {
  const std::pair<std::string, std::vector<int>> cases[] = {
      {"num_output: 2 kernel_size: 6 stride: 2", {2, 2, 5, 5}},
      {"num_output: 3 kernel_h: 5 kernel_w: 3 stride: 3 pad: 1", {2, 2, 2, 6}},
      {"num_output: 2 kernel_size: 3 dilation: 2 stride: 2 force_nd_im2col: true", {1, 2, 4, 4}},
  };
  const Geometry geometries[] = {{{0, 0}, {2, 2}, {1, 1}}, {{1, 1}, {3, 3}, {1, 1}}, {{0, 0}, {2, 2}, {2, 2}}};
  for (const std::string& engine : Engines()) {
    for (size_t i = 0; i < 3; ++i) {
      const auto& c = cases[i];
      SCOPED_TRACE(engine + ": " + c.first);
      LayerParameter param = test::ParseLayer("name: 'conv' type: 'Convolution' convolution_param { " + c.first + " }");
      param.add_bottom("in");
      if (engine == "onednn") {
        test::ExpectErrorContaining([&] { test::CreateWithEngine(param, {c.second}, engine); },
                                    {"reaches past the padded input"});
        continue;
      }
      test::LoggedWarnings warnings;
      Fixture fixture(c.first, {c.second}, engine);
      fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
      ASSERT_EQ(warnings.lines().size(), 1u);
      for (const char* part : {"layer 'conv' (Convolution)", "more than the padded input", "as Caffe does"})
        EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
      fixture.ExpectMatchesReference(geometries[i]);
      test::GradientChecker checker(1e-2f, 1e-3f);
      checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
    }
  }
  // A net's convolution (the registry's first engine that takes it) runs it.
  LayerParameter param = test::ParseLayer("name: 'conv' type: 'Convolution' convolution_param { " + cases[0].first +
                                          " }");
  param.add_bottom("in");
  const std::unique_ptr<Layer> chosen =
      LayerRegistry::Global().Create(param, {cases[0].second}, std::make_shared<Context>());
  EXPECT_EQ(chosen->engine(), "native");
  test::BlobList bottom, top;
  bottom.Add({2, 2, 5, 5});
  top.Add({});
  Layer* layer = chosen.get();
  layer->SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 2, 1, 1}));
  // Past by a whole stride: no output, an error.
  test::ExpectErrorContaining([&] { Fixture f("num_output: 2 kernel_size: 6 stride: 2", {{2, 2, 4, 4}}); },
                              {"layer 'conv' (Convolution)", "kernel_size 6", "by stride 2 or more"});
}

TEST(ConvolutionLayerTest, ParameterGradientsAccumulate) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 3 kernel_size: 3 pad: 1", {{2, 2, 4, 4}}, engine);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    test::FillGaussian(fixture.top.pointers[0], 0.f, 1.f, 99);
    Blob* top = fixture.top.pointers[0];
    std::copy(top->cpu_data(), top->cpu_data() + top->count(), top->mutable_cpu_diff());
    for (auto& blob : fixture.layer->params()) blob->set_diff(0.f);
    fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
    std::vector<std::vector<float>> once;
    for (auto& blob : fixture.layer->params()) once.emplace_back(blob->cpu_diff(), blob->cpu_diff() + blob->count());
    const std::vector<float> bottom_once(fixture.bottom.pointers[0]->cpu_diff(),
                                         fixture.bottom.pointers[0]->cpu_diff() + fixture.bottom.pointers[0]->count());
    fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
    for (size_t b = 0; b < once.size(); ++b)
      for (size_t i = 0; i < once[b].size(); ++i)
        EXPECT_NEAR(fixture.layer->params()[b]->cpu_diff()[i], 2 * once[b][i], 1e-4f) << "blob " << b << " at " << i;
    // The bottom gradient is overwritten, not accumulated.
    for (size_t i = 0; i < bottom_once.size(); ++i)
      EXPECT_FLOAT_EQ(fixture.bottom.pointers[0]->cpu_diff()[i], bottom_once[i]) << i;
  }
}

TEST(ConvolutionLayerTest, FrozenParametersGetNoGradient) {
  for (const std::string& engine : Engines()) {
    SCOPED_TRACE(engine);
    Fixture fixture("num_output: 2 kernel_size: 2", {{1, 2, 3, 3}}, engine);
    fixture.layer->set_param_propagate_down(0, false);
    fixture.layer->set_param_propagate_down(1, false);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    fixture.top.pointers[0]->set_diff(1.f);
    for (auto& blob : fixture.layer->params()) blob->set_diff(0.f);
    fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
    for (auto& blob : fixture.layer->params()) EXPECT_EQ(test::AbsSum(test::DiffOf(*blob)), 0.0);
    EXPECT_GT(test::AbsSum(test::DiffOf(*fixture.bottom.pointers[0])), 0.0);
  }
}

// Runs `engine` and the reference engine on the same random inputs, weights and top gradients, and expects
// the tops, the bottom gradients and the parameter gradients to agree (the conformance check a new engine must
// pass).
// The parameter gradients sum a product over every image and position; `gradient_terms_scale` (the typical
// size of such a sum of random terms, about the square root of their number) scales their tolerance, since
// both engines sum in float, in different orders.
void ExpectAgreesWithTheReferenceEngine(const std::string& param, const std::vector<std::vector<int>>& shapes,
                                        const std::string& engine, float gradient_terms_scale = 1.f) {
  SCOPED_TRACE(engine + ": " + param);
  Fixture reference(param, shapes, "reference");
  Fixture fixture(param, shapes, engine);
  std::vector<bool> propagate_down(shapes.size(), true);
  for (Fixture* f : {&reference, &fixture}) {
    f->layer->Forward(f->bottom.pointers, f->top.pointers);
    for (size_t t = 0; t < f->top.pointers.size(); ++t) {
      Blob* top = f->top.pointers[t];
      Blob gradient(top->shape());
      test::FillGaussian(&gradient, 0.f, 1.f, 50 + t);
      std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), top->mutable_cpu_diff());
    }
    for (auto& blob : f->layer->params()) blob->set_diff(0.f);
    f->layer->Backward(f->top.pointers, propagate_down, f->bottom.pointers);
  }
  const auto expect_close = [](const std::vector<float>& actual, const std::vector<float>& expected,
                               const std::string& what, float scale = 1.f) {
    ASSERT_EQ(actual.size(), expected.size()) << what;
    for (size_t i = 0; i < actual.size(); ++i)
      ASSERT_NEAR(actual[i], expected[i], 1e-4f * (scale + std::abs(expected[i]))) << what << " at " << i;
  };
  for (size_t t = 0; t < fixture.top.pointers.size(); ++t) {
    expect_close(test::DataOf(*fixture.top.pointers[t]), test::DataOf(*reference.top.pointers[t]), "top data");
    expect_close(test::DiffOf(*fixture.bottom.pointers[t]), test::DiffOf(*reference.bottom.pointers[t]),
                 "bottom diff");
  }
  for (size_t b = 0; b < fixture.layer->params().size(); ++b)
    expect_close(test::DiffOf(*fixture.layer->params()[b]), test::DiffOf(*reference.layer->params()[b]),
                 "parameter diff " + std::to_string(b), gradient_terms_scale);
}

TEST(ConvolutionLayerTest, EveryEngineAgreesWithTheReferenceEngine) {
  const std::pair<std::string, std::vector<std::vector<int>>> cases[] = {
      {"num_output: 20 kernel_size: 5 stride: 1", {{4, 1, 12, 12}}},  // LeNet's first layer, smaller
      {"num_output: 6 kernel_size: 3 stride: 2 pad: 1 dilation: 1 group: 3", {{2, 6, 9, 7}}},
      {"num_output: 4 kernel_h: 3 kernel_w: 1 pad_h: 1 dilation: 2", {{2, 3, 6, 5}, {2, 3, 6, 5}}},
      {"num_output: 5 kernel_size: 1", {{3, 4, 4, 4}}},
      // Channels enough for oneDNN's own input-gradient primitive: whole blocks of 16 (its blocked layout), and
      // 10 per group that a block would pad (channels-last).
      {"num_output: 32 kernel_size: 3 pad: 1", {{2, 16, 6, 6}}},
      {"num_output: 24 kernel_size: 3 stride: 2 pad: 1 group: 2", {{2, 20, 9, 8}}},
      {"num_output: 2 kernel_size: 2 stride: 2 bias_term: false axis: 2", {{2, 2, 3, 6, 6}}},
      {"num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 pad: 1 force_nd_im2col: true", {{2, 2, 4, 3, 5}}},
      // Input gradients over a few channels from images large enough that oneDNN's engine makes them a band of
      // output rows at a time (40 rows in bands of 11, the last of 7; 35 in bands of 9), over an odd batch.
      {"num_output: 8 kernel_size: 7 stride: 2 pad: 3", {{3, 3, 80, 80}}},
      {"num_output: 6 kernel_size: 5 stride: 2 pad: 2 group: 3", {{2, 6, 70, 90}}},
      // A strided 1x1 convolution over fewer channels than a block, whose weight gradient oneDNN's jit_1x1 kernels
      // (AVX2's: the avx2. runs of this test) gather wrongly from channels-last blobs (KernelFault).
      {"num_output: 16 kernel_size: 1 stride: 2", {{2, 3, 14, 14}}},
      {"num_output: 8 kernel_size: 1 stride: 2 group: 2", {{2, 10, 9, 9}}},
  };
  // An engine may refuse a case (oneDNN's takes 2-d convolutions over axis 1 only), but every engine takes the
  // six 2-d cases.
  for (const std::string& engine : LayerRegistry::Global().Engines("Convolution", Device::kCPU)) {
    if (engine == "reference") continue;
    int taken = 0;
    for (const auto& c : cases) {
      if (!Takes(engine, c.first, c.second)) continue;
      ++taken;
      ExpectAgreesWithTheReferenceEngine(c.first, c.second, engine);
    }
    EXPECT_GE(taken, 6) << engine;
  }
}

// Random convolutions (test::RandomConvolutionCases: groups, odd and even channel counts, kernels 1 to 5, strides,
// pads, dilations, images from 1 x 1 to 30 x 30) on every engine that takes them against the reference engine; the
// avx2. runs do the same with oneDNN's AVX2 kernels. Comparing oneDNN's engine with a reference over such cases found
// faults of its kernels (KernelFault, layers/vision/onednn_convolution.cpp).
TEST(ConvolutionLayerTest, RandomConvolutionsAgreeWithTheReferenceEngine) {
  for (const std::string& engine : LayerRegistry::Global().Engines("Convolution", Device::kCPU)) {
    if (engine == "reference") continue;
    int compared = 0;
    for (const test::PrecisionCase& c : test::RandomConvolutionCases(false, 300, 36)) {
      LayerParameter param = test::ParseLayer(c.text);
      param.add_bottom("in0");
      const std::vector<std::vector<int>> shapes = {c.shape};
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kCPU}).empty()) continue;
      ExpectAgreesWithTheReferenceEngine(test::ConvolutionParamOf(c), shapes, engine);
      ++compared;
    }
    EXPECT_GE(compared, 250) << engine;
  }
}

#ifdef CREMA_USE_ONEDNN
// In training, oneDNN's engine may run a 3x3 convolution of stride 1 by Winograd's minimal filtering in all three
// passes (oneDNN's training kind, where the CPU has AVX-512). By default that is measured against the direct kernels,
// which a test cannot rely on; forced here. Outputs and both gradients are the reference engine's within Winograd's
// rounding, and the gradients pass the numeric check.
TEST(ConvolutionLayerTest, OneDnnWinogradInTrainingAgreesWithTheReferenceEngine) {
  const test::ScopedEnvironment always("CREMA_ONEDNN_WINOGRAD", "1");
  const bool has_winograd = onednn::EffectiveIsaHas(dnnl::cpu_isa::avx512_core);
  const std::pair<std::string, std::vector<std::vector<int>>> cases[] = {
      {"num_output: 32 kernel_size: 3 pad: 1", {{2, 16, 10, 9}}},
      {"num_output: 16 kernel_size: 3 pad: 1 bias_term: false", {{3, 32, 7, 12}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    Fixture fixture(c.first, c.second, "onednn");
    const auto* layer = dynamic_cast<const OneDnnConvolutionLayer*>(fixture.layer.get());
    ASSERT_NE(layer, nullptr);
    if (has_winograd) {
      EXPECT_NE(layer->implementation().find("wino"), std::string::npos) << layer->implementation();
    }
    ExpectAgreesWithTheReferenceEngine(c.first, c.second, "onednn");
  }
  // The layer is linear in its input and weights, so a large step has no truncation error; it keeps the
  // transforms' rounding (1e-6 to 4e-6 of the largest value, against the direct kernels) from swamping the
  // differences.
  Fixture small("num_output: 16 kernel_size: 3 pad: 1", {{1, 16, 5, 6}}, "onednn");
  test::GradientChecker checker(0.5f, 1e-3f);
  checker.CheckGradient(small.layer.get(), small.bottom.pointers, small.top.pointers);
}
#endif

// A batch too large for one block of the batched engine's workspace runs as several even blocks (here
// 5 images of 2 x 300 x 300 at 1.95 M floats each: blocks of 2, 2 and 1), and still agrees.
TEST(ConvolutionLayerTest, BatchedEngineRunsALargeBatchInSeveralBlocks) {
  const std::string param = "num_output: 4 kernel_size: 3 group: 2 stride: 1";
  const std::vector<std::vector<int>> shapes = {{5, 2, 300, 300}};
  Fixture fixture(param, shapes, "im2col_batched");
  const auto* batched = dynamic_cast<const BatchedConvolutionLayer*>(fixture.layer.get());
  ASSERT_NE(batched, nullptr);
  EXPECT_EQ(batched->block(), 2);
  // Each weight's gradient sums 5 x 298 x 298 = 444,020 random products: sqrt is about 666.
  ExpectAgreesWithTheReferenceEngine(param, shapes, "im2col_batched", 666.f);
}

// SetUp with `param` on one bottom of `shape` must fail with a message naming the layer and `field`.
void ExpectSetUpError(const std::string& param, const std::vector<int>& shape, const std::string& field) {
  SCOPED_TRACE(param);
  test::BlobList bottom, top;
  bottom.Add(shape);
  top.Add({});
  ConvolutionLayer layer(test::ParseLayer("name: 'c' type: 'Convolution' convolution_param { " + param + " }"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  ASSERT_FALSE(message.empty()) << "no error";
  EXPECT_EQ(message.find("layer 'c' (Convolution)"), 0u) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
}

TEST(ConvolutionLayerTest, RejectsBadParameters) {
  const std::vector<int> image = {2, 4, 6, 6};
  ExpectSetUpError("num_output: 2", image, "kernel_size");
  ExpectSetUpError("num_output: 2 kernel_size: 0", image, "kernel_size");
  ExpectSetUpError("num_output: 2 kernel_size: 3 kernel_size: 3 kernel_size: 3", image, "kernel_size");
  ExpectSetUpError("num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3", image, "kernel_h/kernel_w");
  ExpectSetUpError("num_output: 2 kernel_h: 3", image, "kernel_w");
  ExpectSetUpError("num_output: 2 kernel_h: 3 kernel_w: 3", {2, 4, 6, 6, 6}, "kernel_h/kernel_w");
  ExpectSetUpError("num_output: 2 kernel_size: 3 stride: 0", image, "stride");
  ExpectSetUpError("num_output: 2 kernel_size: 3 stride: 1 stride_h: 1 stride_w: 1", image, "stride_h/stride_w");
  ExpectSetUpError("num_output: 2 kernel_size: 3 stride_h: 2", image, "stride_w");
  ExpectSetUpError("num_output: 2 kernel_size: 3 pad: 1 pad_h: 1", image, "pad_h/pad_w");
  ExpectSetUpError("num_output: 2 kernel_size: 3 dilation: 0", image, "dilation");
  ExpectSetUpError("num_output: 2 kernel_size: 3 dilation: 1 dilation: 1 dilation: 1", image, "dilation");
  ExpectSetUpError("kernel_size: 3", image, "num_output");
  ExpectSetUpError("num_output: 2 kernel_size: 3 group: 3", image, "group");
  ExpectSetUpError("num_output: 3 kernel_size: 3 group: 2", image, "num_output");
  ExpectSetUpError("num_output: 2 kernel_size: 3 group: 0", image, "group");
  ExpectSetUpError("num_output: 2 kernel_size: 3 axis: 4", image, "axis");
  ExpectSetUpError("num_output: 2 kernel_size: 3 axis: -1", image, "spatial axis");
  // Output would be empty: the error names the field and the input shape.
  ExpectSetUpError("num_output: 2 kernel_size: 7", image, "kernel_size");
  ExpectSetUpError("num_output: 2 kernel_size: 7", image, "2 4 6 6 (288)");
  ExpectSetUpError("num_output: 2 kernel_size: 3 dilation: 3", image, "dilation");
}

TEST(ConvolutionLayerTest, RejectsBadBottoms) {
  Fixture fixture("num_output: 2 kernel_size: 3", {{2, 3, 5, 5}});
  // A changed channel count no longer fits the weights.
  fixture.bottom.pointers[0]->Reshape({2, 4, 5, 5});
  std::string message =
      test::ErrorMessage([&] { fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers); });
  EXPECT_NE(message.find("channels"), std::string::npos) << message;
  // Several bottoms must share one shape.
  test::BlobList bottom, top;
  bottom.Add({1, 3, 5, 5});
  bottom.Add({1, 3, 5, 6});
  top.Add({});
  top.Add({});
  ConvolutionLayer layer(
      test::ParseLayer("name: 'c' type: 'Convolution' convolution_param { num_output: 2 "
                       "kernel_size: 3 }"));
  message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("1 3 5 6 (90)"), std::string::npos) << message;
  // One top per bottom.
  top.owned.pop_back();
  top.pointers.pop_back();
  ConvolutionLayer arity(
      test::ParseLayer("name: 'c' type: 'Convolution' convolution_param { num_output: 2 "
                       "kernel_size: 3 }"));
  EXPECT_THROW(arity.SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
