#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/vision/pooling.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Distinct values 0.1 apart in random order, so no window has a near tie and the maximum's gradient is
// well defined under the checker's perturbations.
void FillDistinct(Blob* blob, uint64_t seed) {
  RandomStream random(seed);
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) data[i] = 0.1f * (i - blob->count() / 2);
  for (int i = blob->count() - 1; i > 0; --i) std::swap(data[i], data[random.UniformInt(i + 1)]);
}

struct Geometry {
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool ceil = true;
};

// Output size by the formula, in floating point: ceil or floor of (in + 2 * pad - kernel) / stride, plus one,
// less, when padded, a last (ceil) window that would start beyond the input and its leading pad (Caffe's rule;
// without padding Caffe keeps such a window, which then covers no input).
int ReferenceSize(int in, int kernel, int stride, int pad, bool ceil) {
  const double steps = static_cast<double>(in + 2 * pad - kernel) / stride;
  int out = static_cast<int>(ceil ? std::ceil(steps) : std::floor(steps)) + 1;
  if (ceil && pad > 0 && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Naive pooling: visits each window tap by tap, skipping taps outside the input; AVE divides by the number of
// taps inside the padded input.
void ReferencePooling(const Blob& input, const Geometry& g, bool max, std::vector<int>* shape,
                      std::vector<float>* output, std::vector<float>* argmax) {
  const int H = input.shape(2), W = input.shape(3);
  const int out_h = ReferenceSize(H, g.kernel_h, g.stride_h, g.pad_h, g.ceil);
  const int out_w = ReferenceSize(W, g.kernel_w, g.stride_w, g.pad_w, g.ceil);
  *shape = {input.shape(0), input.shape(1), out_h, out_w};
  output->clear();
  argmax->clear();
  for (int n = 0; n < input.shape(0); ++n)
    for (int c = 0; c < input.shape(1); ++c)
      for (int oh = 0; oh < out_h; ++oh)
        for (int ow = 0; ow < out_w; ++ow) {
          float best = -FLT_MAX, sum = 0.f;
          int best_at = -1, taps = 0;
          for (int dy = 0; dy < g.kernel_h; ++dy)
            for (int dx = 0; dx < g.kernel_w; ++dx) {
              const int h = oh * g.stride_h - g.pad_h + dy, w = ow * g.stride_w - g.pad_w + dx;
              if (h < H + g.pad_h && w < W + g.pad_w) ++taps;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const float v = input.data_at(n, c, h, w);
              sum += v;
              if (v > best) {
                best = v;
                best_at = h * W + w;
              }
            }
          // A window that covers no input pixel gives 0 and no argmax.
          output->push_back(best_at < 0 ? 0.f : max ? best : sum / taps);
          argmax->push_back(static_cast<float>(best_at));
        }
}

std::string PoolingText(const std::string& pooling_param) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + pooling_param + " }";
}

struct Case {
  std::string param;
  std::vector<int> shape;
  Geometry geometry;
};

const Case kCases[] = {
    {"kernel_size: 3 stride: 2", {2, 3, 7, 6}, {3, 3, 2, 2, 0, 0}},
    {"kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 3, 7, 6}, {3, 3, 2, 2, 0, 0, false}},
    {"kernel_size: 3 stride: 2 pad: 1", {2, 2, 6, 7}, {3, 3, 2, 2, 1, 1}},
    {"kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR", {2, 2, 6, 7}, {3, 3, 2, 2, 1, 1, false}},
    {"kernel_size: 2 stride: 2 pad: 1", {1, 2, 5, 5}, {2, 2, 2, 2, 1, 1}},  // drops a window in the padding
    {"kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0", {2, 2, 6, 5}, {3, 2, 2, 1, 1, 0}},
    {"kernel_size: 2", {1, 3, 4, 5}, {2, 2, 1, 1, 0, 0}},
    {"kernel_size: 1 stride: 3", {1, 2, 5, 7}, {1, 1, 3, 3, 0, 0}},  // stride beyond the kernel: the last row
                                                                     // of windows covers no input (Caffe's shape)
    {"global_pooling: true", {2, 3, 5, 4}, {5, 4, 1, 1, 0, 0}},
    {"kernel_size: 4 stride: 2", {1, 2, 3, 3}, {4, 4, 2, 2, 0, 0}},  // CEIL: one window, larger than the input
};

TEST(PoolingLayerTest, ForwardMatchesNaivePooling) {
  for (const char* method : {"MAX", "AVE"}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(method) + " " + c.param);
      test::BlobList bottom, top;
      test::FillGaussian(bottom.Add(c.shape), 0.f, 1.f, 42);
      top.Add({});
      PoolingLayer layer(test::ParseLayer(PoolingText(c.param + " pool: " + method)));
      layer.SetUp(bottom.pointers, top.pointers);
      layer.Forward(bottom.pointers, top.pointers);
      std::vector<int> shape;
      std::vector<float> expected, argmax;
      ReferencePooling(*bottom.pointers[0], c.geometry, std::string(method) == "MAX", &shape, &expected, &argmax);
      ASSERT_EQ(top.pointers[0]->shape(), shape);
      for (int i = 0; i < top.pointers[0]->count(); ++i)
        EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5f) << i;
    }
  }
}

// Pooling's engines through the registry, as a net would choose them: each forward matches the naive
// pooling and each gradient the numeric one, on every case the engine takes. Only oneDNN's engine refuses
// cases (STOCHASTIC, an argmax top, a window over no input, and AVE whose last window passes the padding).
TEST(PoolingLayerTest, EveryEngineMatchesNaivePoolingAndItsGradient) {
  for (const std::string& engine : LayerRegistry::Global().Engines("Pooling", Device::kCPU)) {
    int taken = 0;
    for (const char* method : {"MAX", "AVE"}) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(engine + " " + method + " " + c.param);
        LayerParameter param = test::ParseLayer(PoolingText(c.param + " pool: " + method));
        param.add_bottom("in");
        param.add_top("out");
        std::unique_ptr<Layer> layer;
        try {
          layer = test::CreateWithEngine(param, {c.shape}, engine);
        } catch (const Error& error) {
          EXPECT_EQ(engine, "onednn") << error.what();
          continue;
        }
        ++taken;
        test::BlobList bottom, top;
        Blob* input = bottom.Add(c.shape);
        FillDistinct(input, 17);
        top.Add({});
        layer->SetUp(bottom.pointers, top.pointers);
        layer->Forward(bottom.pointers, top.pointers);
        std::vector<int> shape;
        std::vector<float> expected, argmax;
        ReferencePooling(*input, c.geometry, std::string(method) == "MAX", &shape, &expected, &argmax);
        ASSERT_EQ(top.pointers[0]->shape(), shape);
        for (int i = 0; i < top.pointers[0]->count(); ++i)
          EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5f) << i;
        test::GradientChecker checker(1e-2f, 1e-2f);
        checker.CheckGradient(layer.get(), bottom.pointers, top.pointers);
      }
    }
    // The native engine takes all 20; oneDNN's all but the window over no input (both methods) and the two
    // AVE cases whose last window passes the padding.
    EXPECT_EQ(taken, engine == "native" ? 20 : 16) << engine;
  }
}

TEST(PoolingLayerTest, CeilAndFloorSizes) {
  // {in, kernel, stride, pad, ceil size, floor size}
  const int cases[][6] = {{6, 3, 2, 0, 3, 2},    {7, 3, 2, 0, 3, 3},  {6, 3, 2, 1, 4, 3},  {5, 2, 2, 1, 3, 3},
                          {28, 2, 2, 0, 14, 14}, {13, 3, 2, 0, 6, 6}, {14, 3, 2, 0, 7, 6}, {4, 1, 2, 0, 3, 2},
                          {5, 1, 3, 0, 3, 2}};  // Caffe keeps an empty last window
  for (const auto& c : cases) {
    for (bool ceil : {true, false}) {
      test::BlobList bottom, top;
      bottom.Add({1, 1, c[0], c[0]});
      top.Add({});
      PoolingLayer layer(
          test::ParseLayer(PoolingText("kernel_size: " + std::to_string(c[1]) + " stride: " + std::to_string(c[2]) +
                                       " pad: " + std::to_string(c[3]) + (ceil ? "" : " round_mode: FLOOR"))));
      layer.SetUp(bottom.pointers, top.pointers);
      const int expected = ceil ? c[4] : c[5];
      EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{1, 1, expected, expected}))
          << "in " << c[0] << " kernel " << c[1] << " stride " << c[2] << " pad " << c[3]
          << (ceil ? " CEIL" : " FLOOR");
    }
  }
}

TEST(PoolingLayerTest, MaxMaskTopHoldsArgmax) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    FillDistinct(bottom.Add(c.shape), 5);
    top.Add({});
    top.Add({});
    PoolingLayer layer(test::ParseLayer(PoolingText(c.param)));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    std::vector<int> shape;
    std::vector<float> expected, argmax;
    ReferencePooling(*bottom.pointers[0], c.geometry, true, &shape, &expected, &argmax);
    ASSERT_EQ(top.pointers[1]->shape(), shape);
    for (int i = 0; i < top.pointers[1]->count(); ++i) {
      EXPECT_EQ(top.pointers[0]->cpu_data()[i], expected[i]) << i;
      EXPECT_EQ(top.pointers[1]->cpu_data()[i], argmax[i]) << i;
    }
  }
}

TEST(PoolingLayerTest, Gradients) {
  for (const char* method : {"MAX", "AVE"}) {
    for (const Case& c : kCases) {
      for (int tops : {1, 2}) {
        if (tops == 2 && std::string(method) == "AVE") continue;
        SCOPED_TRACE(std::string(method) + " " + c.param + " tops " + std::to_string(tops));
        test::BlobList bottom, top;
        Blob* input = bottom.Add(c.shape);
        if (std::string(method) == "MAX") {
          FillDistinct(input, 11);
        } else {
          test::FillGaussian(input, 0.f, 1.f, 11);
        }
        for (int t = 0; t < tops; ++t) top.Add({});
        PoolingLayer layer(test::ParseLayer(PoolingText(c.param + " pool: " + method)));
        layer.SetUp(bottom.pointers, top.pointers);
        test::GradientChecker checker(1e-2f, 1e-2f);
        checker.CheckGradient(&layer, bottom.pointers, top.pointers);
      }
    }
  }
}

TEST(PoolingLayerTest, LargeInputTakesTheParallelPathAndMatches) {
  // Enough outputs for the OpenMP loop over planes to start threads.
  for (const char* method : {"MAX", "AVE"}) {
    SCOPED_TRACE(method);
    test::BlobList bottom, top;
    Blob* input = bottom.Add({4, 16, 65, 64});
    if (std::string(method) == "MAX") {
      FillDistinct(input, 13);
    } else {
      test::FillGaussian(input, 0.f, 1.f, 13);
    }
    top.Add({});
    PoolingLayer layer(test::ParseLayer(PoolingText(std::string("kernel_size: 3 stride: 2 pad: 1 pool: ") + method)));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    std::vector<int> shape;
    std::vector<float> expected, argmax;
    ReferencePooling(*bottom.pointers[0], {3, 3, 2, 2, 1, 1}, std::string(method) == "MAX", &shape, &expected, &argmax);
    ASSERT_EQ(top.pointers[0]->shape(), shape);
    ASSERT_GE(top.pointers[0]->count(), 1 << 15);
    for (int i = 0; i < top.pointers[0]->count(); ++i)
      ASSERT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5f) << i;
    // Backward passes each output's gradient to its window: with unit top gradients the bottom gradient sums
    // to the number of outputs for MAX, and for AVE to the share of each window inside the input, which is what
    // AVE of an all-ones input gives.
    top.pointers[0]->set_diff(1.f);
    layer.Backward(top.pointers, {true}, bottom.pointers);
    double total = 0, expected_total = top.pointers[0]->count();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) total += bottom.pointers[0]->cpu_diff()[i];
    if (std::string(method) == "AVE") {
      bottom.pointers[0]->set_data(1.f);
      layer.Forward(bottom.pointers, top.pointers);
      expected_total = test::AbsSum(test::DataOf(*top.pointers[0]));
      EXPECT_LT(expected_total, top.pointers[0]->count());  // the padding takes a share
    }
    EXPECT_NEAR(total, expected_total, 1e-2);
  }
}

TEST(PoolingLayerTest, ReshapeFollowsTheInput) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 6, 6}));
  top.Add({});
  PoolingLayer layer(test::ParseLayer(PoolingText("global_pooling: true pool: AVE")));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3, 1, 1}));
  bottom.pointers[0]->Reshape({4, 3, 3, 5});
  test::FillGaussian(bottom.pointers[0], 0.f, 1.f, 3);
  layer.Reshape(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 3, 1, 1}));
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 3; ++c) {
      double sum = 0;
      for (int i = 0; i < 15; ++i) sum += bottom.pointers[0]->cpu_data()[(n * 3 + c) * 15 + i];
      EXPECT_NEAR(top.pointers[0]->data_at(n, c), sum / 15, 1e-5);
    }
}

// STOCHASTIC in TRAIN: each output is one of its window's values, drawn with probability proportional to it,
// and its gradient goes to the drawn position. Windows of (1, 3): 3 is drawn three times in four.
TEST(PoolingLayerTest, StochasticTrainingDrawsInProportionAndRoutesTheGradient) {
  test::BlobList bottom, top;
  Blob* input = bottom.Add({1, 2, 50, 20});
  for (int i = 0; i < input->count(); ++i) input->mutable_cpu_data()[i] = i % 2 == 0 ? 1.f : 3.f;
  top.Add({});
  LayerParameter param = test::ParseLayer(
      "name: 'pool' type: 'Pooling' phase: TRAIN "
      "pooling_param { pool: STOCHASTIC kernel_h: 1 kernel_w: 2 stride_h: 1 stride_w: 2 }");
  PoolingLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{1, 2, 50, 10}));
  int threes = 0;
  for (float v : test::DataOf(*top.pointers[0])) {
    ASSERT_TRUE(v == 1.f || v == 3.f) << v;
    threes += v == 3.f;
  }
  EXPECT_NEAR(threes / 1000.0, 0.75, 0.05);
  top.pointers[0]->set_diff(1.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  const std::vector<float> diff = test::DiffOf(*input);
  for (int i = 0; i < input->count(); i += 2) {
    // One of each pair got the gradient: the one whose value was drawn.
    ASSERT_EQ(diff[i] + diff[i + 1], 1.f) << i;
    ASSERT_EQ(diff[i + 1], top.pointers[0]->cpu_data()[i / 2] == 3.f ? 1.f : 0.f) << i;
  }
  // The draws come from the layer's random stream: the same seed draws the same outputs.
  PoolingLayer again(param);
  test::BlobList again_top;
  again_top.Add({});
  again.SetUp(bottom.pointers, again_top.pointers);
  again.Forward(bottom.pointers, again_top.pointers);
  EXPECT_EQ(test::DataOf(*again_top.pointers[0]), test::DataOf(*top.pointers[0]));
}

// STOCHASTIC in TEST: the expectation of the draw, sum(x^2) / sum(x) over each window, and its gradient.
TEST(PoolingLayerTest, StochasticTestingGivesTheExpectation) {
  test::BlobList bottom, top;
  test::FillUniform(bottom.Add({2, 2, 5, 5}), 0.1f, 2.f, 3);
  top.Add({});
  PoolingLayer layer(test::ParseLayer(
      "name: 'pool' type: 'Pooling' phase: TEST pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 2, 2, 2}));
  const float* x = bottom.pointers[0]->cpu_data();
  for (int plane = 0; plane < 4; ++plane) {
    for (int ph = 0; ph < 2; ++ph) {
      for (int pw = 0; pw < 2; ++pw) {
        double sum = 0, squares = 0;
        for (int h = ph * 2; h < ph * 2 + 3; ++h)
          for (int w = pw * 2; w < pw * 2 + 3; ++w) {
            sum += x[plane * 25 + h * 5 + w];
            squares += x[plane * 25 + h * 5 + w] * x[plane * 25 + h * 5 + w];
          }
        EXPECT_NEAR(top.pointers[0]->cpu_data()[plane * 4 + ph * 2 + pw], squares / sum, 1e-5);
      }
    }
  }
  test::GradientChecker checker(1e-3f, 1e-2f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

// SetUp with `param` on a bottom of `shape` and `tops` tops must fail with a message naming the layer and
// every one of `parts`.
void ExpectSetUpError(const std::string& param, const std::vector<std::string>& parts,
                      const std::vector<int>& shape = {2, 3, 6, 6}, int tops = 1) {
  SCOPED_TRACE(param);
  test::BlobList bottom, top;
  bottom.Add(shape);
  for (int t = 0; t < tops; ++t) top.Add({});
  PoolingLayer layer(test::ParseLayer(PoolingText(param)));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  ASSERT_FALSE(message.empty()) << "no error";
  EXPECT_EQ(message.find("layer 'pool' (Pooling)"), 0u) << message;
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

TEST(PoolingLayerTest, RejectsBadParameters) {
  ExpectSetUpError("pool: STOCHASTIC kernel_size: 2", {"4-d"}, {2, 3, 6});
  ExpectSetUpError("stride: 2", {"kernel_size"});
  ExpectSetUpError("kernel_size: 0", {"kernel_size"});
  ExpectSetUpError("kernel_size: 2 kernel_h: 2 kernel_w: 2", {"kernel_h/kernel_w"});
  ExpectSetUpError("kernel_h: 2", {"kernel_w"});
  ExpectSetUpError("kernel_size: 2 stride: 0", {"stride"});
  ExpectSetUpError("kernel_size: 2 stride: 1 stride_h: 1 stride_w: 1", {"stride_h/stride_w"});
  ExpectSetUpError("kernel_size: 2 stride_h: 2", {"stride_w"});
  ExpectSetUpError("kernel_size: 3 pad: 1 pad_h: 1", {"pad_h/pad_w"});
  ExpectSetUpError("kernel_size: 2 pad: 2", {"pad", "kernel_size"});
  ExpectSetUpError("global_pooling: true kernel_size: 2", {"global_pooling", "kernel_size"});
  ExpectSetUpError("global_pooling: true pad: 1", {"global_pooling", "pad"});
  ExpectSetUpError("global_pooling: true stride: 2", {"global_pooling", "stride"});
  ExpectSetUpError("kernel_size: 2", {"4-d", "2 3 6 (36)"}, {2, 3, 6});
  ExpectSetUpError("kernel_size: 7 round_mode: FLOOR", {"kernel_size", "height"});
  ExpectSetUpError("kernel_size: 9", {"kernel_size", "height"});
  // Only MAX has a second (mask) top.
  ExpectSetUpError("kernel_size: 2 pool: AVE", {"at most 1 top"}, {2, 3, 6, 6}, 2);
  ExpectSetUpError("kernel_size: 2", {"at most 2 top"}, {2, 3, 6, 6}, 3);
}

}  // namespace
}  // namespace crema
