// 8-bit inference of convolutions (QuantizationParameter, oneDNN's engine): the outputs are an integer convolution
// of the quantized input and weights, computed here independently, scaled back; training nets ignore the setting.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#ifdef CREMA_USE_ONEDNN
#include <dnnl.hpp>

#include "layers/common/onednn_inner_product.hpp"
#include "layers/layer_registry.hpp"
#include "layers/onednn_util.hpp"
#include "layers/vision/onednn_convolution.hpp"
#include "net/lifetimes.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Whether oneDNN has 8-bit convolutions on this CPU (AVX2 and later).
bool HasInt8Kernels() { return onednn::HasInt8DotProducts(); }

struct Geometry {
  int kernel = 3, stride = 1, pad = 1, group = 1;
};

// The documented rule, computed in plain integers: the input as round(x * input_scale) clamped to [0, 255] or
// [-128, 127], each output channel's weights as round(w * 127 / m) with m their largest magnitude, the products
// summed exactly, then divided by both scales, plus the bias.
std::vector<float> IntegerReference(const Blob& input, const Blob& weights, const Blob* bias, const Geometry& g,
                                    float input_scale, bool input_unsigned) {
  const int num = input.shape(0), channels = input.shape(1), height = input.shape(2), width = input.shape(3);
  const int outputs = weights.shape(0), group_channels = channels / g.group, group_outputs = outputs / g.group;
  const int out_h = (height + 2 * g.pad - g.kernel) / g.stride + 1;
  const int out_w = (width + 2 * g.pad - g.kernel) / g.stride + 1;
  const int low = input_unsigned ? 0 : -128, high = input_unsigned ? 255 : 127;
  std::vector<int> q_input(input.count());
  for (int i = 0; i < input.count(); ++i) {
    const double scaled = std::nearbyint(static_cast<double>(input.cpu_data()[i]) * input_scale);
    q_input[i] = static_cast<int>(std::min<double>(high, std::max<double>(low, scaled)));
  }
  const int row = weights.count() / outputs;
  std::vector<int> q_weights(weights.count());
  std::vector<double> weight_scales(outputs);
  for (int o = 0; o < outputs; ++o) {
    float largest = 0.f;
    for (int i = 0; i < row; ++i) largest = std::max(largest, std::abs(weights.cpu_data()[o * row + i]));
    weight_scales[o] = largest > 0.f ? 127.f / largest : 1.f;
    for (int i = 0; i < row; ++i) {
      const float scaled = std::nearbyint(weights.cpu_data()[o * row + i] * static_cast<float>(weight_scales[o]));
      q_weights[o * row + i] = static_cast<int>(std::min(127.f, std::max(-127.f, scaled)));
    }
  }
  std::vector<float> out;
  for (int n = 0; n < num; ++n) {
    for (int o = 0; o < outputs; ++o) {
      const int first_channel = (o / group_outputs) * group_channels;
      for (int y = 0; y < out_h; ++y) {
        for (int x = 0; x < out_w; ++x) {
          int64_t sum = 0;
          for (int c = 0; c < group_channels; ++c) {
            for (int ky = 0; ky < g.kernel; ++ky) {
              for (int kx = 0; kx < g.kernel; ++kx) {
                const int iy = y * g.stride - g.pad + ky, ix = x * g.stride - g.pad + kx;
                if (iy < 0 || iy >= height || ix < 0 || ix >= width) continue;
                sum += static_cast<int64_t>(q_input[((n * channels + first_channel + c) * height + iy) * width + ix]) *
                       q_weights[((o * group_channels + c) * g.kernel + ky) * g.kernel + kx];
              }
            }
          }
          out.push_back(static_cast<float>(static_cast<double>(sum) / (input_scale * weight_scales[o]) +
                                           (bias ? bias->cpu_data()[o] : 0.f)));
        }
      }
    }
  }
  return out;
}

std::string ConvNet(const std::vector<int>& shape, const std::string& conv, const std::string& quantization,
                    const std::string& rest = "") {
  return "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: " + std::to_string(shape[0]) +
         " dim: " + std::to_string(shape[1]) + " dim: " + std::to_string(shape[2]) +
         " dim: " + std::to_string(shape[3]) + " } } }\n" +
         "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'out' convolution_param { " + conv + " } " +
         quantization + " }\n" + rest;
}

// A net of `text` on oneDNN's engine, forward only (or with a backward pass where `train`), inputs and weights drawn
// with `seed`.
std::unique_ptr<Net> BuildNet(const std::string& text, bool train = false, float input_low = -1.f,
                              float input_high = 1.f, uint64_t seed = 3) {
  NetParameter param = test::ParseNet(text);
  if (train) param.set_force_backward(true);
  auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->force_engine("Convolution", "onednn");
  context->force_engine("InnerProduct", "onednn");
  auto net = std::make_unique<Net>(param, context);
  for (const auto& layer : net->layers())
    for (const auto& blob : layer->params()) test::FillUniform(blob.get(), -0.5f, 1.f, seed++);
  for (Blob* input : net->input_blobs()) test::FillUniform(input, input_low, input_high, seed++);
  net->PlanMemory(train);
  net->RunAfterWeightsPasses();
  return net;
}

// The layer of the step that runs 'conv' (a fold makes a new one where it fuses the ReLU after it).
const OneDnnConvolutionLayer& ConvolutionOf(const Net& net) {
  const OneDnnConvolutionLayer* layer = nullptr;
  for (const PlanStep& step : net.plan())
    if (net.layer_names()[net.rewrite_of(step.layer)] == "conv")
      layer = dynamic_cast<const OneDnnConvolutionLayer*>(net.layers()[step.layer].get());
  EXPECT_NE(layer, nullptr);
  return *layer;
}

void ExpectMatches(const std::vector<float>& actual, const std::vector<float>& expected, float tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  float largest = 0.f;
  for (float v : expected) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.f);
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * largest) << "at " << i << " of " << expected.size();
}

TEST(Int8ConvolutionTest, OutputsAreTheIntegerConvolutionScaledBack) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  struct Case {
    std::string conv;
    Geometry geometry;
    std::vector<int> shape;
    float input_scale;
    bool input_unsigned;
    float low, high;
  };
  const Case cases[] = {
      // Inputs not negative, as after a ReLU: unsigned, some above 255 / input_scale (clamped).
      {"num_output: 24 kernel_size: 3 pad: 1", {3, 1, 1, 1}, {2, 16, 9, 8}, 100.f, true, 0.f, 3.f},
      // Signed inputs, a stride, groups, no bias.
      {"num_output: 12 kernel_size: 3 pad: 1 stride: 2 group: 2 bias_term: false",
       {3, 2, 1, 2},
       {2, 8, 11, 7},
       60.f,
       false,
       -2.f,
       2.f},
      // A 1x1 kernel over few channels.
      {"num_output: 5 kernel_size: 1 pad: 0", {1, 1, 0, 1}, {3, 3, 5, 6}, 127.f, false, -1.f, 1.f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.conv);
    const std::string quantization = "quantization { input_scale: " + std::to_string(c.input_scale) +
                                     (c.input_unsigned ? " input_unsigned: true" : "") + " }";
    const auto net = BuildNet(ConvNet(c.shape, c.conv, quantization), false, c.low, c.high);
    ASSERT_TRUE(ConvolutionOf(*net).runs_int8()) << ConvolutionOf(*net).implementation();
    net->Forward();
    const Layer& conv = *net->layer_by_name("conv");
    const std::vector<float> expected = IntegerReference(*net->blob_by_name("data"), *conv.params()[0],
                                                         conv.params().size() > 1 ? conv.params()[1].get() : nullptr,
                                                         c.geometry, c.input_scale, c.input_unsigned);
    // Exact integer sums; what differs is the float arithmetic of scaling back.
    ExpectMatches(test::DataOf(*net->blob_by_name("out")), expected, 1e-5f);
  }
}

// Against the same net in float: within what 8 bits allow (a few hundredths of the largest output here).
TEST(Int8ConvolutionTest, CloseToTheFloatConvolution) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const std::string conv = "num_output: 32 kernel_size: 3 pad: 1";
  const auto float_net = BuildNet(ConvNet({2, 32, 10, 10}, conv, ""), false, 0.f, 1.f);
  const auto int8_net = BuildNet(
      ConvNet({2, 32, 10, 10}, conv, "quantization { input_scale: 255 input_unsigned: true }"), false, 0.f, 1.f);
  ASSERT_FALSE(ConvolutionOf(*float_net).runs_int8());
  ASSERT_TRUE(ConvolutionOf(*int8_net).runs_int8());
  float_net->Forward();
  int8_net->Forward();
  const std::vector<float> exact = test::DataOf(*float_net->blob_by_name("out"));
  const std::vector<float> quantized = test::DataOf(*int8_net->blob_by_name("out"));
  ExpectMatches(quantized, exact, 0.02f);
  // And not the float result itself: the setting took effect.
  double differ = 0;
  for (size_t i = 0; i < exact.size(); ++i) differ += std::abs(quantized[i] - exact[i]);
  EXPECT_GT(differ, 0.0);
}

// Weights set after the first pass (as `crema test` loading a model, or Python) are quantized again, with the output
// scales that follow them; and a fused ReLU (the fold of a ReLU after the convolution) applies to the scaled output.
TEST(Int8ConvolutionTest, NewWeightsAreQuantizedAgainAndAFusedReluApplies) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const Geometry geometry;
  const auto net =
      BuildNet(ConvNet({2, 16, 6, 7}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
                       "layer { name: 'relu' type: 'ReLU' bottom: 'out' top: 'out' }"));
  ASSERT_TRUE(ConvolutionOf(*net).runs_int8());
  Layer& conv = *net->layer_by_name("conv");
  for (uint64_t seed : {21u, 22u}) {
    test::FillUniform(conv.params()[0].get(), -2.f, 1.f, seed);
    test::FillUniform(conv.params()[1].get(), -3.f, 3.f, seed + 10);
    net->Forward();
    std::vector<float> expected =
        IntegerReference(*net->blob_by_name("data"), *conv.params()[0], conv.params()[1].get(), geometry, 50.f, false);
    for (float& v : expected) v = std::max(v, 0.f);
    ExpectMatches(test::DataOf(*net->blob_by_name("out")), expected, 1e-5f);
  }
}

// An inner product in 8 bits: the same rule over its N x K weights (or K x N with transpose), signed and unsigned
// inputs, against the products computed here in integers.
TEST(Int8InnerProductTest, OutputsAreTheIntegerProductScaledBack) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  for (const bool transpose : {false, true}) {
    for (const bool input_unsigned : {false, true}) {
      SCOPED_TRACE(std::string(transpose ? "transposed" : "plain") + (input_unsigned ? ", unsigned" : ", signed"));
      const float input_scale = input_unsigned ? 200.f : 90.f;
      const std::string text =
          "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 5 dim: 3 dim: 4 dim: 6 } } }\n"
          "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'out' inner_product_param { num_output: 7 " +
          std::string(transpose ? "transpose: true" : "") +
          " } quantization { input_scale: " + std::to_string(input_scale) +
          (input_unsigned ? " input_unsigned: true" : "") + " } }\n";
      const auto net = BuildNet(text, false, input_unsigned ? 0.f : -1.5f, 1.5f);
      const auto* layer = dynamic_cast<const OneDnnInnerProductLayer*>(net->layers()[net->plan().back().layer].get());
      ASSERT_NE(layer, nullptr);
      ASSERT_TRUE(layer->runs_int8());
      net->Forward();
      const Blob& input = *net->blob_by_name("data");
      const Blob& weights = *layer->params()[0];
      const Blob& bias = *layer->params()[1];
      const int m = 5, k = 72, n = 7, low = input_unsigned ? 0 : -128, high = input_unsigned ? 255 : 127;
      std::vector<float> expected;
      for (int row = 0; row < m; ++row) {
        for (int o = 0; o < n; ++o) {
          const auto weight = [&](int i) { return weights.cpu_data()[transpose ? i * n + o : o * k + i]; };
          float largest = 0.f;
          for (int i = 0; i < k; ++i) largest = std::max(largest, std::abs(weight(i)));
          const float weight_scale = 127.f / largest;
          int64_t sum = 0;
          for (int i = 0; i < k; ++i) {
            const double x = std::nearbyint(static_cast<double>(input.cpu_data()[row * k + i]) * input_scale);
            const int q = static_cast<int>(std::min<double>(high, std::max<double>(low, x)));
            sum += static_cast<int64_t>(q) * static_cast<int>(std::nearbyint(weight(i) * weight_scale));
          }
          expected.push_back(static_cast<float>(static_cast<double>(sum) / (input_scale * weight_scale)) +
                             bias.cpu_data()[o]);
        }
      }
      ExpectMatches(test::DataOf(*net->blob_by_name("out")), expected, 1e-5f);
    }
  }
}

// The layouts between steps are planned for the engines as the inference rewrites leave them: 8-bit kernels take
// other layouts than the float ones the net was first built with (channels-last on AVX-512), and a blob kept in the
// float engines' layout would be reordered at each step's edges.
TEST(Int8ConvolutionTest, LayoutsArePlannedForTheEnginesAsRewritten) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const auto net =
      BuildNet(ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
                       "layer { name: 'relu' type: 'ReLU' bottom: 'out' top: 'out' }\n"
                       "layer { name: 'conv2' type: 'Convolution' bottom: 'out' top: 'out2' "
                       "convolution_param { num_output: 32 kernel_size: 1 } "
                       "quantization { input_scale: 40 input_unsigned: true } }\n"
                       "layer { name: 'conv3' type: 'Convolution' bottom: 'out2' top: 'out3' "
                       "convolution_param { num_output: 16 kernel_size: 1 } }\n"));
  ASSERT_TRUE(ConvolutionOf(*net).runs_int8());
  int runs = 0;
  for (const PlanStep& step : net->plan()) {
    const Layer& writer = *net->layers()[step.layer];
    if (dynamic_cast<const OneDnnConvolutionLayer*>(&writer) == nullptr ||
        step.tops[0] == net->output_blob_indices()[0])
      continue;
    std::vector<Layout> bottoms;
    for (int b : step.bottoms) bottoms.push_back(net->blobs()[b]->layout());
    const Blob& top = *net->blobs()[step.tops[0]];
    SCOPED_TRACE(net->blob_names()[step.tops[0]]);
    EXPECT_EQ(LayoutName(top.layout()), LayoutName(writer.OffersLayout(0, bottoms)));
    runs += top.layout() != Layout::kPlain;
  }
  EXPECT_EQ(runs, 2);
}

// A chain of 8-bit convolutions: conv (16 -> 32, 3x3) + ReLU, then conv2 (1x1) reading the ReLU's output unsigned at
// scale 40, then (where `tail` says) more.
std::string ChainNet(const std::string& conv2_quantization, const std::string& tail = "",
                     const std::string& activation = "ReLU") {
  return ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
                 "layer { name: 'act' type: '" + activation + "' bottom: 'out' top: 'out' }\n" +
                     "layer { name: 'conv2' type: 'Convolution' bottom: 'out' top: 'out2' convolution_param { "
                     "num_output: 24 kernel_size: 1 } " +
                     conv2_quantization + " }\n" + tail);
}

// Where the plan keeps an 8-bit step's output in 8 bits for the next one (plan_element_types), the result is the two
// integer convolutions computed here one after the other: the first one's output quantized as the second reads it.
TEST(Int8ChainTest, AnEightBitStepPassesItsIntegersToTheNext) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const auto net = BuildNet(ChainNet("quantization { input_scale: 40 input_unsigned: true }"));
  const Blob& middle = *net->blob_by_name("out");
  ASSERT_EQ(ElementTypeName(middle.data_type()), ElementTypeName(ElementType::kUInt8));
  EXPECT_EQ(middle.quantization().scale, 40.f);
  // A quarter of the bytes under the memory plan.
  bool found = false;
  for (const BufferLifetime& buffer : ComputeLifetimes(*net, false).buffers) {
    if (buffer.gradient || buffer.blob != "out") continue;
    found = true;
    EXPECT_EQ(buffer.bytes, static_cast<size_t>(middle.count()));
  }
  EXPECT_TRUE(found);
  net->Forward();

  const Layer& conv = *net->layer_by_name("conv");
  const Layer& conv2 = *net->layer_by_name("conv2");
  std::vector<float> first =
      IntegerReference(*net->blob_by_name("data"), *conv.params()[0], conv.params()[1].get(), Geometry(), 50.f, false);
  Blob relu({2, 32, 8, 8});
  for (size_t i = 0; i < first.size(); ++i) relu.mutable_cpu_data()[i] = std::max(first[i], 0.f);
  Geometry one_by_one;
  one_by_one.kernel = 1;
  one_by_one.pad = 0;
  const std::vector<float> expected =
      IntegerReference(relu, *conv2.params()[0], conv2.params()[1].get(), one_by_one, 40.f, true);
  // The integers passed on are what the second step would have made of the first one's float output: round(y * 40),
  // saturated. Rounding y * 40 from the integer sums in one product or in two may differ where it lies a hair from a
  // half: such an input is off by 1/40, each output by at most 1/40 of a weight (below 1 here).
  std::vector<float> actual = test::DataOf(*net->blob_by_name("out2"));
  ASSERT_EQ(actual.size(), expected.size());
  int off = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 2.f / 40) << "at " << i;
    off += std::abs(actual[i] - expected[i]) > 1e-4f * std::max(1.f, std::abs(expected[i]));
  }
  EXPECT_LE(off, static_cast<int>(expected.size() / 20));
  // The middle blob reads back as its integers over the scale: the ReLU'd first output, rounded to 1/40.
  const std::vector<float> stored = PlainValues(middle);
  for (size_t i = 0; i < stored.size(); ++i)
    ASSERT_NEAR(stored[i], std::min(relu.cpu_data()[i], 255.f / 40), 0.5f / 40 + 1e-4f) << "at " << i;
  // And the same net with every blob in floats gives the same outputs to that rounding.
  test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
  const auto float_net = BuildNet(ChainNet("quantization { input_scale: 40 input_unsigned: true }"));
  EXPECT_FALSE(float_net->blob_by_name("out")->quantization().integers());
  float_net->Forward();
  ExpectMatches(test::DataOf(*float_net->blob_by_name("out2")), actual, 2.f / 40);
}

// A blob stays in floats where a reader reads floats, readers quantize it differently, or the writer cannot write
// integers (a fused sigmoid is not scaled by scaling its input; a fused sum over a float summand no 8-bit step reads,
// whose range is not known).
TEST(Int8ChainTest, BlobsStayInFloatsWhereAStepNeedsThem) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const std::string unsigned40 = "quantization { input_scale: 40 input_unsigned: true }";
  const struct {
    const char* what;
    std::string net;
    bool integers;
    const char* blob = "out";
  } cases[] = {
      {"one 8-bit reader", ChainNet(unsigned40), true},
      {"a float reader too",
       ChainNet(unsigned40,
                "layer { name: 'pool' type: 'Pooling' bottom: 'out' top: 'pooled' "
                "pooling_param { pool: AVE kernel_size: 2 stride: 2 } }\n"),
       false},
      {"a MAX pooling passing it on to a net output",
       ChainNet(unsigned40,
                "layer { name: 'pool' type: 'Pooling' bottom: 'out' top: 'pooled' "
                "pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"),
       false},
      {"two 8-bit readers alike",
       ChainNet(unsigned40,
                "layer { name: 'conv3' type: 'Convolution' bottom: 'out' top: 'out3' convolution_param { "
                "num_output: 8 kernel_size: 1 } " +
                    unsigned40 + " }\n"),
       true},
      {"two 8-bit readers in other scales",
       ChainNet(unsigned40,
                "layer { name: 'conv3' type: 'Convolution' bottom: 'out' top: 'out3' convolution_param { "
                "num_output: 8 kernel_size: 1 } quantization { input_scale: 30 input_unsigned: true } }\n"),
       false},
      {"a signed reader", ChainNet("quantization { input_scale: 40 }"), true},
      {"a float convolution reading it", ChainNet(""), false},
      {"a fused sigmoid", ChainNet(unsigned40, "", "Sigmoid"), false},
      {"a fused sum over a float summand",
       ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
               "layer { name: 'proj' type: 'Convolution' bottom: 'data' top: 'proj' convolution_param { "
               "num_output: 32 kernel_size: 1 } quantization { input_scale: 50 } }\n"
               "layer { name: 'sum' type: 'Eltwise' bottom: 'out' bottom: 'proj' top: 'sum' }\n"
               "layer { name: 'act' type: 'ReLU' bottom: 'sum' top: 'sum' }\n"
               "layer { name: 'conv2' type: 'Convolution' bottom: 'sum' top: 'out2' convolution_param { "
               "num_output: 24 kernel_size: 1 } " +
                   unsigned40 + " }\n"),
       false, "sum"},
      {"a reader of two bottoms (one set of primitives for both)",
       ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
               "layer { name: 'act' type: 'ReLU' bottom: 'out' top: 'out' }\n"
               "layer { name: 'conv_b' type: 'Convolution' bottom: 'data' top: 'out_b' convolution_param { "
               "num_output: 32 kernel_size: 3 pad: 1 } quantization { input_scale: 50 } }\n"
               "layer { name: 'act_b' type: 'ReLU' bottom: 'out_b' top: 'out_b' }\n"
               "layer { name: 'conv2' type: 'Convolution' bottom: 'out' bottom: 'out_b' top: 'out2' top: 'out2_b' "
               "convolution_param { num_output: 24 kernel_size: 1 } " +
                   unsigned40 + " }\n"),
       false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto net = BuildNet(c.net);
    EXPECT_EQ(net->blob_by_name(c.blob)->quantization().integers(), c.integers);
    net->Forward();  // and runs
    for (int id : net->output_blob_indices()) EXPECT_FALSE(net->blobs()[id]->quantization().integers());
  }
}

// Steps that pass values through (a MAX pooling, a Concat) join their bottoms and tops: an inception-like branch
// point, its 8-bit output read by a convolution and pooled, the two joined and read by another 8-bit convolution,
// runs in 8 bits from the first convolution to the last, with the outputs of the same net in floats to the rounding
// of the integers passed on.
TEST(Int8ChainTest, PoolingAndConcatPassIntegersThrough) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const std::string unsigned40 = "quantization { input_scale: 40 input_unsigned: true }";
  const std::string text =
      ChainNet(unsigned40,
               "layer { name: 'relu2' type: 'ReLU' bottom: 'out2' top: 'out2' }\n"
               "layer { name: 'pool' type: 'Pooling' bottom: 'out' top: 'pooled' "
               "pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }\n"
               "layer { name: 'join' type: 'Concat' bottom: 'pooled' bottom: 'out2' top: 'joined' }\n"
               "layer { name: 'conv3' type: 'Convolution' bottom: 'joined' top: 'out3' convolution_param { "
               "num_output: 8 kernel_size: 1 } " +
                   unsigned40 + " }\n");
  const auto net = BuildNet(text);
  for (const char* name : {"out", "pooled", "out2", "joined"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(ElementType::kUInt8));
    EXPECT_EQ(net->blob_by_name(name)->quantization().scale, 40.f);
  }
  net->Forward();
  test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
  const auto float_net = BuildNet(text);
  float_net->Forward();
  // The pooled integers are exactly the integers of the pooled floats (the largest of rounded values is the rounded
  // largest); the joined blob is the two 8-bit parts side by side.
  const std::vector<float> out = PlainValues(*net->blob_by_name("out"));
  const std::vector<float> pooled = PlainValues(*net->blob_by_name("pooled"));
  const std::vector<float> joined = PlainValues(*net->blob_by_name("joined"));
  const std::vector<float> out2 = PlainValues(*net->blob_by_name("out2"));
  const int positions = 8 * 8, channels = 32, channels2 = 24;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < channels; ++c)
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) {
          float largest = 0.f;
          for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
              if (y + dy >= 0 && y + dy < 8 && x + dx >= 0 && x + dx < 8)
                largest = std::max(largest, out[(n * channels + c) * positions + (y + dy) * 8 + x + dx]);
          const int at = (n * channels + c) * positions + y * 8 + x;
          ASSERT_EQ(pooled[at], largest) << "at " << at;
          ASSERT_EQ(joined[(n * (channels + channels2) + c) * positions + y * 8 + x], largest) << "at " << at;
        }
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < channels2 * positions; ++i)
      ASSERT_EQ(joined[(n * (channels + channels2) + channels) * positions + i], out2[n * channels2 * positions + i]);
  ExpectMatches(test::DataOf(*net->blob_by_name("out3")), test::DataOf(*float_net->blob_by_name("out3")), 0.02f);
  // And with every blob in the plain layout (the pooling and the join then work on plain 8-bit values), the same.
  test::ScopedEnvironment plain("CREMA_LAYOUTS", "plain");
  unsetenv("CREMA_ELEMENT_TYPES");
  const auto plain_net = BuildNet(text);
  ASSERT_TRUE(plain_net->blob_by_name("pooled")->quantization().integers());
  EXPECT_EQ(LayoutName(plain_net->blob_by_name("pooled")->layout()), LayoutName(Layout::kPlain));
  plain_net->Forward();
  EXPECT_EQ(PlainValues(*plain_net->blob_by_name("joined")), joined);
}

// An LRN running forward only in channels-last writes its output in 8 bits where its readers quantize it alike
// (GoogLeNet's stem: norm1 read by conv2/3x3_reduce, norm2 pooled into inception_3a): the integers are those the
// readers would have made of its float output, round(y * scale) saturated, and the net's output is the all-float net's
// to that rounding.
TEST(Int8ChainTest, AnLRNWritesTheIntegersItsReadersWouldMake) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  test::ScopedEnvironment channels_last("CREMA_ONEDNN_ACTIVATIONS", "nhwc");  // the LRN's own loops on every CPU
  const std::string text =
      ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
              "layer { name: 'act' type: 'ReLU' bottom: 'out' top: 'out' }\n"
              "layer { name: 'norm' type: 'LRN' bottom: 'out' top: 'norm' "
              "lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }\n"
              "layer { name: 'pool' type: 'Pooling' bottom: 'norm' top: 'pooled' "
              "pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }\n"
              "layer { name: 'conv2' type: 'Convolution' bottom: 'pooled' top: 'out2' convolution_param { "
              "num_output: 24 kernel_size: 1 } quantization { input_scale: 30 input_unsigned: true } }\n");
  // The LRN's output as it stands right after its step (the memory plan lends its buffer to later blobs).
  const auto lrn_output = [](Net* net) {
    for (size_t s = 0; s < net->plan().size(); ++s) {
      net->ForwardStep(s);
      if (net->layer_names()[net->plan()[s].layer] == "norm") return PlainValues(*net->blob_by_name("norm"));
    }
    ADD_FAILURE() << "no step runs 'norm'";
    return std::vector<float>();
  };
  const auto net = BuildNet(text);
  ASSERT_EQ(net->layer_by_name("norm")->engine(), "onednn");
  for (const char* name : {"norm", "pooled"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ElementTypeName(net->blob_by_name(name)->data_type()), ElementTypeName(ElementType::kUInt8));
    EXPECT_EQ(net->blob_by_name(name)->quantization().scale, 30.f);
  }
  EXPECT_FALSE(net->blob_by_name("out")->quantization().integers());  // the LRN reads floats
  const std::vector<float> stored = lrn_output(net.get());
  net->Forward();

  test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
  const auto float_net = BuildNet(text);
  const std::vector<float> exact = lrn_output(float_net.get());
  float_net->Forward();
  ASSERT_EQ(stored.size(), exact.size());
  int saturated = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    // Its integers over the scale: the float output rounded to 1/30 (saturated at 255/30).
    ASSERT_NEAR(stored[i], std::min(exact[i], 255.f / 30), 0.5f / 30 + 1e-5f) << "at " << i;
    saturated += exact[i] > 255.f / 30;
  }
  EXPECT_LT(saturated, static_cast<int>(exact.size() / 10));
  ExpectMatches(test::DataOf(*net->blob_by_name("out2")), test::DataOf(*float_net->blob_by_name("out2")), 0.02f);
}

// Blob `name` of `net` as it stands right after the step that writes it, running the steps up to it (the memory plan
// lends its buffer to later blobs).
std::vector<float> WrittenValues(Net* net, const std::string& name) {
  for (size_t s = 0; s < net->plan().size(); ++s) {
    net->ForwardStep(s);
    for (int top : net->plan()[s].tops)
      if (net->blob_names()[top] == name) return PlainValues(*net->blobs()[top]);
  }
  ADD_FAILURE() << "no step writes '" << name << "'";
  return std::vector<float>();
}

// `scale` in a prototxt, to the float's last bit.
std::string ScaleText(float scale) {
  std::ostringstream text;
  text << std::setprecision(9) << scale;
  return text.str();
}

// A scale for `values` as `crema quantize` finds one from their range, with room (an 8-bit net's values drift): 200 /
// their largest magnitude.
float RoomyScale(const std::vector<float>& values) {
  float largest = 0.f;
  for (float v : values) largest = std::max(largest, std::abs(v));
  return 200.f / largest;
}

// Residual units (ResNet's): a convolution with a fused sum and ReLU writes its output in 8 bits over a summand in
// the output's type, in another scale (sum_scale, the ratio): an 8-bit summand, in the summand's own memory where it
// dies there, or a float one (its writer computing in float), quantized into the output's memory as its 8-bit reader
// quantizes it; and the next unit's convolution adds that output as an 8-bit summand into a float output
// (dequantized): 'out' (u8, 1/40, or floats) -> conv2 -> conv2b + out -> 'res' (u8, 1/30) -> conv3 + res -> 'res2'
// (float, the net's output). The same net with every blob in floats gives the same to the rounding.
TEST(Int8ChainTest, ResidualSumsPassIntegers) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  // The net, its convolutions in floats where `scales` is empty, else in 8 bits reading 'out', 'out2' and 'res' with
  // those scales (the first convolution in 8 bits with `eight_bit_summand`).
  const auto text = [](const std::vector<float>& scales, bool eight_bit_summand) {
    const auto reads = [&](size_t blob) {
      return scales.empty() ? std::string()
                            : "quantization { input_scale: " + ScaleText(scales[blob]) + " input_unsigned: true }";
    };
    return ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1",
                   !scales.empty() && eight_bit_summand ? "quantization { input_scale: 50 }" : "",
                   "layer { name: 'act' type: 'ReLU' bottom: 'out' top: 'out' }\n"
                   "layer { name: 'conv2' type: 'Convolution' bottom: 'out' top: 'out2' convolution_param { "
                   "num_output: 24 kernel_size: 1 } " +
                       reads(0) +
                       " }\n"
                       "layer { name: 'act_b' type: 'ReLU' bottom: 'out2' top: 'out2' }\n"
                       "layer { name: 'conv2b' type: 'Convolution' bottom: 'out2' top: 'out2b' convolution_param { "
                       "num_output: 32 kernel_size: 1 } " +
                       reads(1) +
                       " }\n"
                       "layer { name: 'sum' type: 'Eltwise' bottom: 'out2b' bottom: 'out' top: 'res' }\n"
                       "layer { name: 'act2' type: 'ReLU' bottom: 'res' top: 'res' }\n"
                       "layer { name: 'conv3' type: 'Convolution' bottom: 'res' top: 'out3' convolution_param { "
                       "num_output: 32 kernel_size: 3 pad: 1 } " +
                       reads(2) +
                       " }\n"
                       "layer { name: 'sum2' type: 'Eltwise' bottom: 'out3' bottom: 'res' top: 'res2' }\n"
                       "layer { name: 'act3' type: 'ReLU' bottom: 'res2' top: 'res2' }\n");
  };
  const auto written = WrittenValues;
  std::vector<float> scales;
  {
    const auto float_net = BuildNet(text({}, false));
    for (const char* name : {"out", "out2", "res"}) scales.push_back(RoomyScale(written(float_net.get(), name)));
  }
  const float s_out = scales[0], s_res = scales[2];
  for (const bool eight_bit_summand : {true, false}) {
    SCOPED_TRACE(eight_bit_summand ? "an 8-bit summand" : "a float summand");
    const std::string net_text = text(scales, eight_bit_summand);
    const auto net = BuildNet(net_text);
    const Blob& res = *net->blob_by_name("res");
    const Blob& out = *net->blob_by_name("out");
    ASSERT_EQ(out.quantization().integers(), eight_bit_summand);
    ASSERT_EQ(ElementTypeName(res.data_type()), ElementTypeName(ElementType::kUInt8));
    EXPECT_FLOAT_EQ(res.quantization().scale, s_res);
    EXPECT_FALSE(net->blob_by_name("res2")->quantization().integers());
    // An 8-bit 'out' dies where 'res' is written, in its type: 'res' takes its memory.
    if (eight_bit_summand) {
      EXPECT_EQ(res.cpu_bytes(), out.cpu_bytes());
    }
    for (const BufferLifetime& buffer : ComputeLifetimes(*net, false).buffers) {
      if (!buffer.gradient && buffer.blob == "res") {
        EXPECT_EQ(buffer.bytes, static_cast<size_t>(res.count()));
      }
    }
    const std::vector<float> stored = written(net.get(), "res");
    net->Forward();

    test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
    const auto float_net = BuildNet(net_text);
    ASSERT_FALSE(float_net->blob_by_name("res")->quantization().integers());
    const std::vector<float> exact = written(float_net.get(), "res");
    float_net->Forward();
    // The integers are the float sum's, round(y * s_res), but for the summand's own rounding to 1 / s_out (the float
    // net adds 'out' unrounded) and the output's; a product input a hair from a half may round the other way in one
    // net, moving an output by a weight's share of a step, in a few places.
    ASSERT_EQ(stored.size(), exact.size());
    int off = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_NEAR(stored[i], exact[i], 4.f / s_res + 2.f / scales[1]) << "at " << i;
      off += std::abs(stored[i] - exact[i]) > 0.5f / s_out + 0.5f / s_res + 1e-4f * std::abs(exact[i]);
    }
    EXPECT_LE(off, static_cast<int>(exact.size() / 50));
    ExpectMatches(test::DataOf(*net->blob_by_name("res2")), test::DataOf(*float_net->blob_by_name("res2")), 0.02f);
  }
}

// A unit with a projection shortcut (ResNet's first of a stage): the projection's output, which only the fused sum
// reads, passes in signed 8 bits at the scale the Eltwise was given (`crema quantize` measures the summand), and the
// 8-bit output of the sum (unsigned, after the ReLU) adds it as signed integers. The float net's to the rounding.
TEST(Int8ChainTest, AProjectionShortcutPassesItsIntegersAtTheSumsScale) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  // Its convolutions in floats where `scales` is empty, else in 8 bits reading 'out' and 'out2' and the sum holding
  // 'proj' with the scales given, and the last convolution reading 'res' with the last.
  const auto text = [](const std::vector<float>& scales) {
    const auto with = [&](size_t blob, bool is_unsigned) {
      return scales.empty() ? std::string()
                            : "quantization { input_scale: " + ScaleText(scales[blob]) +
                                  (is_unsigned ? " input_unsigned: true }" : " }");
    };
    return ConvNet({2, 16, 8, 8}, "num_output: 32 kernel_size: 3 pad: 1",
                   scales.empty() ? "" : "quantization { input_scale: 50 }",
                   "layer { name: 'act' type: 'ReLU' bottom: 'out' top: 'out' }\n"
                   "layer { name: 'proj' type: 'Convolution' bottom: 'out' top: 'proj' convolution_param { "
                   "num_output: 48 kernel_size: 1 } " +
                       with(0, true) +
                       " }\n"
                       "layer { name: 'conv2' type: 'Convolution' bottom: 'out' top: 'out2' convolution_param { "
                       "num_output: 24 kernel_size: 1 } " +
                       with(0, true) +
                       " }\n"
                       "layer { name: 'act_b' type: 'ReLU' bottom: 'out2' top: 'out2' }\n"
                       "layer { name: 'conv2b' type: 'Convolution' bottom: 'out2' top: 'out2b' convolution_param { "
                       "num_output: 48 kernel_size: 1 } " +
                       with(1, true) +
                       " }\n"
                       "layer { name: 'sum' type: 'Eltwise' bottom: 'out2b' bottom: 'proj' top: 'res' " +
                       with(2, false) +
                       " }\n"
                       "layer { name: 'act2' type: 'ReLU' bottom: 'res' top: 'res' }\n"
                       "layer { name: 'conv3' type: 'Convolution' bottom: 'res' top: 'out3' convolution_param { "
                       "num_output: 16 kernel_size: 1 } " +
                       with(3, true) + " }\n");
  };
  std::vector<float> scales;
  {
    const auto float_net = BuildNet(text({}));
    for (const char* name : {"out", "out2", "proj", "res"})
      scales.push_back(RoomyScale(WrittenValues(float_net.get(), name)));
    scales[2] /= 2;  // signed: 127 steps each way
  }
  const auto net = BuildNet(text(scales));
  const Blob& proj = *net->blob_by_name("proj");
  ASSERT_EQ(ElementTypeName(proj.data_type()), ElementTypeName(ElementType::kInt8));
  EXPECT_FLOAT_EQ(proj.quantization().scale, scales[2]);
  const Blob& res = *net->blob_by_name("res");
  ASSERT_EQ(ElementTypeName(res.data_type()), ElementTypeName(ElementType::kUInt8));
  EXPECT_FLOAT_EQ(res.quantization().scale, scales[3]);
  const std::vector<float> stored_proj = WrittenValues(net.get(), "proj");
  const std::vector<float> stored = WrittenValues(net.get(), "res");
  net->Forward();

  test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
  const auto float_net = BuildNet(text(scales));
  const std::vector<float> exact_proj = WrittenValues(float_net.get(), "proj");
  const std::vector<float> exact = WrittenValues(float_net.get(), "res");
  float_net->Forward();
  // Each rounded to 1 / scale, but where an input of the projection a hair from a half rounded the other way.
  ASSERT_EQ(stored_proj.size(), exact_proj.size());
  int negative = 0, proj_off = 0;
  for (size_t i = 0; i < exact_proj.size(); ++i) {
    ASSERT_NEAR(stored_proj[i], exact_proj[i], 0.5f / scales[2] + 2.f / scales[0]) << "at " << i;
    proj_off += std::abs(stored_proj[i] - exact_proj[i]) > 0.5f / scales[2] + 1e-4f * std::abs(exact_proj[i]);
    negative += exact_proj[i] < 0.f;
  }
  EXPECT_LE(proj_off, static_cast<int>(exact_proj.size() / 50));
  EXPECT_GT(negative,
            static_cast<int>(exact_proj.size() / 100));  // signed values, which an unsigned output cannot hold
  ASSERT_EQ(stored.size(), exact.size());
  int off = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    ASSERT_NEAR(stored[i], exact[i], 4.f / scales[3] + 2.f / scales[1]) << "at " << i;
    off += std::abs(stored[i] - exact[i]) > 0.5f / scales[2] + 0.5f / scales[3] + 1e-4f * std::abs(exact[i]);
  }
  EXPECT_LE(off, static_cast<int>(exact.size() / 50));
  ExpectMatches(test::DataOf(*net->blob_by_name("out3")), test::DataOf(*float_net->blob_by_name("out3")), 0.02f);
}

// Inner products read and write 8-bit blobs as convolutions do: LeNet's shape, conv -> MAX pool -> inner product
// (+ ReLU) -> inner product, runs in 8 bits from the first step to the last, with the outputs of the same net in
// floats to the rounding of the integers passed on.
TEST(Int8ChainTest, InnerProductsReadAndWriteIntegers) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const std::string text = ConvNet(
      {4, 8, 8, 8}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
      "layer { name: 'pool' type: 'Pooling' bottom: 'out' top: 'pooled' "
      "pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
      "layer { name: 'ip1' type: 'InnerProduct' bottom: 'pooled' top: 'ip1' inner_product_param { num_output: 32 } "
      "quantization { input_scale: 20 } }\n"
      "layer { name: 'relu' type: 'ReLU' bottom: 'ip1' top: 'ip1' }\n"
      "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2' inner_product_param { num_output: 10 } "
      "quantization { input_scale: 30 input_unsigned: true } }\n");
  const auto net = BuildNet(text);
  EXPECT_EQ(ElementTypeName(net->blob_by_name("out")->data_type()), ElementTypeName(ElementType::kInt8));
  EXPECT_EQ(ElementTypeName(net->blob_by_name("pooled")->data_type()), ElementTypeName(ElementType::kInt8));
  EXPECT_EQ(net->blob_by_name("pooled")->quantization().scale, 20.f);
  EXPECT_EQ(ElementTypeName(net->blob_by_name("ip1")->data_type()), ElementTypeName(ElementType::kUInt8));
  EXPECT_EQ(net->blob_by_name("ip1")->quantization().scale, 30.f);
  net->Forward();
  test::ScopedEnvironment floats("CREMA_ELEMENT_TYPES", "float");
  const auto float_net = BuildNet(text);
  EXPECT_FALSE(float_net->blob_by_name("ip1")->quantization().integers());
  float_net->Forward();
  // The integers the second inner product read are those it would have made of the first one's float output.
  const std::vector<float> passed = PlainValues(*net->blob_by_name("ip1"));
  const std::vector<float> computed = test::DataOf(*float_net->blob_by_name("ip1"));
  ASSERT_EQ(passed.size(), computed.size());
  for (size_t i = 0; i < passed.size(); ++i)
    ASSERT_NEAR(passed[i], std::min(255.f, std::nearbyint(computed[i] * 30.f)) / 30.f, 1.f / 30 + 1e-5f) << i;
  ExpectMatches(test::DataOf(*net->blob_by_name("ip2")), test::DataOf(*float_net->blob_by_name("ip2")), 0.02f);
}

// A layer that reads floats never sees the integers: the float accessors refuse them and say how to get floats.
TEST(Int8ChainTest, AnEightBitBlobRefusesFloatReads) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const auto net = BuildNet(ChainNet("quantization { input_scale: 40 input_unsigned: true }"));
  const Blob& middle = *net->blob_by_name("out");
  ASSERT_TRUE(middle.quantization().integers());
  test::ExpectErrorContaining([&] { middle.cpu_data(); },
                              {"2 32 8 8", "unsigned 8-bit integers", "CREMA_ELEMENT_TYPES"});
  EXPECT_NE(middle.cpu_bytes(), nullptr);
}

// A net planned for a backward pass after its inference plan (Python's net.backward()) reads floats again: its
// 8-bit blobs become float ones and its convolutions compute in float.
TEST(Int8ChainTest, PlanningABackwardPassTurnsTheBlobsBackIntoFloats) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const auto net =
      BuildNet(ConvNet({2, 16, 6, 6}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
                       "layer { name: 'conv2' type: 'Convolution' bottom: 'out' top: 'out2' "
                       "convolution_param { num_output: 8 kernel_size: 1 } "
                       "quantization { input_scale: 20 } }\n"));
  ASSERT_EQ(ElementTypeName(net->blob_by_name("out")->data_type()), ElementTypeName(ElementType::kInt8));
  net->Forward();
  net->PlanMemory(true);
  EXPECT_FALSE(net->blob_by_name("out")->quantization().integers());
  net->Forward();
  EXPECT_FALSE(ConvolutionOf(*net).runs_int8());
  net->Backward();
  EXPECT_NE(net->blob_by_name("out")->cpu_data(), nullptr);
}

// A net that trains computes in float (its gradients need the float weights), whatever the setting says.
TEST(Int8ConvolutionTest, ATrainingNetComputesInFloat) {
  const std::string text =
      ConvNet({2, 16, 6, 6}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }");
  const auto net = BuildNet(text, true);
  EXPECT_FALSE(ConvolutionOf(*net).runs_int8());
  NetParameter plain = test::ParseNet(text);
  plain.mutable_layer(1)->clear_quantization();
  const auto reference = BuildNet(plain.DebugString(), true);
  net->Forward();
  reference->Forward();
  ExpectMatches(test::DataOf(*net->blob_by_name("out")), test::DataOf(*reference->blob_by_name("out")), 1e-6f);
}

// Weights that are not all finite numbers cannot be quantized: an error naming the layer and the output, not a
// silent value.
TEST(Int8ConvolutionTest, WeightsThatAreNotFiniteAreNamed) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no VNNI on this CPU: 8-bit layers compute in float here";
  const auto net =
      BuildNet(ConvNet({1, 16, 4, 4}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }"));
  ASSERT_TRUE(ConvolutionOf(*net).runs_int8());
  net->layer_by_name("conv")->params()[0]->mutable_cpu_data()[3 * 144 + 5] = std::nanf("");
  test::ExpectErrorContaining([&] { net->Forward(); }, {"conv", "output 3", "not all finite"});
}

TEST(Int8ConvolutionTest, ABadScaleIsNamed) {
  for (const char* scale : {"0", "-2", "inf"}) {
    SCOPED_TRACE(scale);
    test::ExpectErrorContaining(
        [&] {
          BuildNet(ConvNet({1, 16, 4, 4}, "num_output: 16 kernel_size: 3 pad: 1",
                           std::string("quantization { input_scale: ") + scale + " }"));
        },
        {"conv", "quantization.input_scale", "positive"});
    // The same on the Eltwise SUM a convolution takes as its fused sum.
    test::ExpectErrorContaining(
        [&] {
          BuildNet(ConvNet({1, 16, 4, 4}, "num_output: 16 kernel_size: 3 pad: 1", "quantization { input_scale: 50 }",
                           std::string("layer { name: 'sum' type: 'Eltwise' bottom: 'out' bottom: 'data' top: 'res' "
                                       "quantization { input_scale: ") +
                               scale + " } }\n"));
        },
        {"layer 'sum' (Eltwise)", "quantization.input_scale", "positive"});
  }
}

}  // namespace
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
