#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/normalization/lrn.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter LrnParam(const std::string& lrn_param) {
  return test::ParseLayer("name: 'norm' type: 'LRN' lrn_param { " + lrn_param + " }");
}

// y = x * scale^-beta with the scale summed directly over the neighbourhood, in double.
std::vector<double> Reference(const Blob& x, int size, double alpha, double beta, double k, bool across) {
  const int N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const auto at = [&](int n, int c, int h, int w) -> double {
    if (c < 0 || c >= C || h < 0 || h >= H || w < 0 || w >= W) return 0.0;  // zero padding
    return x.cpu_data()[((n * C + c) * H + h) * W + w];
  };
  const int half = size / 2;
  std::vector<double> out;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          double sum = 0;
          if (across) {
            for (int d = -half; d <= half; ++d) sum += at(n, c + d, h, w) * at(n, c + d, h, w);
          } else {
            for (int dh = -half; dh <= half; ++dh)
              for (int dw = -half; dw <= half; ++dw) sum += at(n, c, h + dh, w + dw) * at(n, c, h + dh, w + dw);
          }
          const double scale = across ? k + alpha / size * sum : 1.0 + alpha / (size * size) * sum;
          out.push_back(at(n, c, h, w) * std::pow(scale, -beta));
        }
  return out;
}

struct Case {
  std::string param;
  int size;
  double alpha, beta, k;
  bool across;
};

const Case kCases[] = {
    {"", 5, 1.0, 0.75, 1.0, true},
    {"local_size: 3 alpha: 0.5 beta: 0.6 k: 2", 3, 0.5, 0.6, 2.0, true},
    {"norm_region: WITHIN_CHANNEL local_size: 3 alpha: 0.8 beta: 0.7", 3, 0.8, 0.7, 1.0, false},
    // k is ignored within a channel, as in Caffe.
    {"norm_region: WITHIN_CHANNEL k: 5", 5, 1.0, 0.75, 1.0, false},
};

TEST(LRNLayerTest, ForwardMatchesDirectSums) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 7, 3, 4}), 0.f, 1.5f, 81);
    top.Add({});
    LRNLayer layer(LrnParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    const auto expected = Reference(*bottom.pointers[0], c.size, c.alpha, c.beta, c.k, c.across);
    for (int i = 0; i < top.pointers[0]->count(); ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5);
  }
}

TEST(LRNLayerTest, Gradients) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 5, 3, 3}), 0.f, 1.f, 82);
    top.Add({});
    LRNLayer layer(LrnParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(layer.internal_blobs().size(), 1u);
    EXPECT_EQ(layer.internal_blob_names()[0], "norm.scale");
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

// LRN's CPU engines through the registry, as a net chooses them: every engine takes every case (oneDNN's too, on
// this shape) and matches the direct sums and the numeric gradient. (The GPU-only cuDNN engine is the conformance
// harness's.)
TEST(LRNLayerTest, EveryEngineMatchesDirectSumsAndItsGradient) {
  for (const std::string& engine : LayerRegistry::Global().Engines("LRN", Device::kCPU)) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(engine + ": " + c.param);
      LayerParameter param = LrnParam(c.param);
      param.add_bottom("in");
      param.add_top("out");
      const std::vector<int> shape = {2, 7, 5, 4};
      std::unique_ptr<Layer> layer = test::CreateWithEngine(param, {shape}, engine);
      test::BlobList bottom, top;
      test::FillGaussian(bottom.Add(shape), 0.f, 1.5f, 83);
      top.Add({});
      layer->SetUp(bottom.pointers, top.pointers);
      layer->Forward(bottom.pointers, top.pointers);
      const auto expected = Reference(*bottom.pointers[0], c.size, c.alpha, c.beta, c.k, c.across);
      for (int i = 0; i < top.pointers[0]->count(); ++i)
        ASSERT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5) << i;
      test::GradientChecker(1e-2f, 1e-3f).CheckGradient(layer.get(), bottom.pointers, top.pointers);
    }
  }
}

// A window of one channel (y = x (k + alpha x^2)^-beta): oneDNN's kernels across channels crash while they are made
// for it, so its engine refuses it, and the engine the registry picks instead (in a net that trains: backward too)
// matches the direct sums and its gradient. A window of one position within a channel stays oneDNN's.
TEST(LRNLayerTest, AWindowOfOneIsTakenAndComputed) {
  const std::vector<int> shape = {2, 16, 5, 4};
  for (const bool across : {true, false}) {
    const std::string text =
        std::string(across ? "" : "norm_region: WITHIN_CHANNEL ") + "local_size: 1 alpha: 2 beta: 0.75 k: 1.5";
    SCOPED_TRACE(text);
    LayerParameter param = LrnParam(text);
    param.add_bottom("in");
    param.add_top("out");
#ifdef CREMA_USE_ONEDNN
    const std::vector<std::vector<int>> shapes = {shape};
    const std::string refusal = LayerRegistry::Global().Refusal("onednn", EngineQuery{param, shapes, Device::kCPU});
    EXPECT_EQ(refusal.find("local_size of 1") != std::string::npos, across) << refusal;
#endif
    std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, {shape}, std::make_shared<Context>());
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(shape), 0.f, 1.5f, 84);
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    layer->Forward(bottom.pointers, top.pointers);
    const auto expected = Reference(*bottom.pointers[0], 1, 2.0, 0.75, 1.5, across);
    for (int i = 0; i < top.pointers[0]->count(); ++i)
      ASSERT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5) << i;
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(layer.get(), bottom.pointers, top.pointers);
  }
}

// The oneDNN engine in a net that runs forward only, its bottom and top kept channels-last (as between 8-bit
// convolutions): crema's own loops across channels (layers/normalization/lrn_channels_last.hpp), against the direct
// sums; channel counts below, at and past a vector's 16, both of beta's paths.
TEST(LRNLayerTest, ChannelsLastForwardOnlyMatchesDirectSums) {
  const std::vector<std::string> engines = LayerRegistry::Global().Engines("LRN", Device::kCPU);
  if (std::find(engines.begin(), engines.end(), "onednn") == engines.end()) GTEST_SKIP() << "no oneDNN in this build";
  for (int channels : {7, 16, 37}) {
    for (const Case& c : kCases) {
      if (!c.across) continue;
      SCOPED_TRACE(std::to_string(channels) + " channels: " + c.param);
      LayerParameter param = LrnParam(c.param);
      param.add_bottom("in");
      param.add_top("out");
      const std::vector<int> shape = {2, channels, 3, 5};
      std::unique_ptr<Layer> layer = test::CreateWithEngine(param, {shape}, "onednn");
      layer->set_backward_planned(false);
      Blob plain(shape);
      test::FillGaussian(&plain, 0.f, 1.5f, 84 + channels);
      test::BlobList bottom, top;
      Blob* in = bottom.Add(shape);
      in->set_layout(Layout::kChannelsLast);
      const int positions = shape[2] * shape[3];
      for (int n = 0; n < shape[0]; ++n)
        for (int ch = 0; ch < channels; ++ch)
          for (int p = 0; p < positions; ++p)
            in->mutable_cpu_data()[(n * positions + p) * channels + ch] =
                plain.cpu_data()[(n * channels + ch) * positions + p];
      top.Add({})->set_layout(Layout::kChannelsLast);
      layer->SetUp(bottom.pointers, top.pointers);
      layer->Forward(bottom.pointers, top.pointers);
      const auto expected = Reference(plain, c.size, c.alpha, c.beta, c.k, c.across);
      const std::vector<float> actual = PlainValues(*top.pointers[0]);
      for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-5) << i;
    }
  }
}

// The oneDNN engine in training over channels-last blobs (a convolution's output over channels that blocks would pad):
// forward and the input gradient against the direct sums and their derivative in double, for windows up to 9 and
// channel counts below, at and past a block of 16 (oneDNN's kernel for the gradient over this layout errs from a
// local_size of 7 with more than 16 channels not a multiple of 16, and the engine then takes channel blocks).
TEST(LRNLayerTest, ChannelsLastTrainingMatchesDirectSumsAndTheirDerivative) {
  const std::vector<std::string> engines = LayerRegistry::Global().Engines("LRN", Device::kCPU);
  if (std::find(engines.begin(), engines.end(), "onednn") == engines.end()) GTEST_SKIP() << "no oneDNN in this build";
  const double alpha = 0.8, beta = 0.75, k = 1.5;
  for (int channels : {7, 16, 20, 37}) {
    for (int size : {5, 7, 9}) {
      SCOPED_TRACE(std::to_string(channels) + " channels, local_size " + std::to_string(size));
      LayerParameter param = LrnParam("local_size: " + std::to_string(size) + " alpha: 0.8 beta: 0.75 k: 1.5");
      param.add_bottom("in");
      param.add_top("out");
      const std::vector<int> shape = {2, channels, 3, 2};
      std::unique_ptr<Layer> layer = test::CreateWithEngine(param, {shape}, "onednn");
      Blob plain(shape), plain_dy(shape);
      test::FillGaussian(&plain, 0.f, 1.5f, 85 + channels);
      test::FillGaussian(&plain_dy, 0.f, 1.f, 86 + channels);
      test::BlobList bottom, top;
      Blob* in = bottom.Add(shape);
      in->set_layout(Layout::kChannelsLast);
      Blob* out = top.Add({});
      out->set_layout(Layout::kChannelsLast);
      const int positions = shape[2] * shape[3];
      const auto stored = [&](int n, int ch, int p) { return (n * positions + p) * channels + ch; };
      const auto plain_at = [&](int n, int ch, int p) { return (n * channels + ch) * positions + p; };
      for (int n = 0; n < shape[0]; ++n)
        for (int ch = 0; ch < channels; ++ch)
          for (int p = 0; p < positions; ++p)
            in->mutable_cpu_data()[stored(n, ch, p)] = plain.cpu_data()[plain_at(n, ch, p)];
      layer->SetUp(bottom.pointers, top.pointers);
      layer->Forward(bottom.pointers, top.pointers);
      const auto expected = Reference(plain, size, alpha, beta, k, true);
      const std::vector<float> actual = PlainValues(*out);
      for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-5) << i;
      for (int n = 0; n < shape[0]; ++n)
        for (int ch = 0; ch < channels; ++ch)
          for (int p = 0; p < positions; ++p)
            out->mutable_cpu_diff()[stored(n, ch, p)] = plain_dy.cpu_data()[plain_at(n, ch, p)];
      layer->Backward(top.pointers, {true}, bottom.pointers);
      const std::vector<float> dx = PlainDiffs(*in);
      // dx_c = dy_c S_c^-beta - 2 alpha beta / size x_c sum_{w near c} dy_w x_w S_w^(-beta-1),
      // S_c = k + alpha / size sum_{w near c} x_w^2.
      for (int n = 0; n < shape[0]; ++n)
        for (int p = 0; p < positions; ++p) {
          const auto x = [&](int ch) { return static_cast<double>(plain.cpu_data()[plain_at(n, ch, p)]); };
          const auto dy = [&](int ch) { return static_cast<double>(plain_dy.cpu_data()[plain_at(n, ch, p)]); };
          std::vector<double> scale(channels);
          for (int ch = 0; ch < channels; ++ch) {
            double squares = 0;
            for (int w = std::max(0, ch - size / 2); w <= std::min(channels - 1, ch + size / 2); ++w)
              squares += x(w) * x(w);
            scale[ch] = k + alpha / size * squares;
          }
          for (int ch = 0; ch < channels; ++ch) {
            double cross = 0;
            for (int w = std::max(0, ch - size / 2); w <= std::min(channels - 1, ch + size / 2); ++w)
              cross += dy(w) * x(w) * std::pow(scale[w], -beta - 1);
            const double want = dy(ch) * std::pow(scale[ch], -beta) - 2 * alpha * beta / size * x(ch) * cross;
            ASSERT_NEAR(dx[plain_at(n, ch, p)], want, 1e-5) << n << " " << ch << " " << p;
          }
        }
    }
  }
}

TEST(LRNLayerTest, RejectsBadParametersAndShapes) {
  const auto expect_error = [](const std::string& param, const std::vector<int>& shape,
                               const std::vector<std::string>& parts) {
    test::BlobList bottom, top;
    bottom.Add(shape);
    top.Add({});
    test::ExpectErrorContaining(
        [&] {
          LRNLayer layer(LrnParam(param));
          layer.SetUp(bottom.pointers, top.pointers);
        },
        parts);
  };
  expect_error("local_size: 4", {1, 3, 2, 2}, {"layer 'norm' (LRN)", "lrn_param.local_size 4", "odd"});
  expect_error("local_size: 0", {1, 3, 2, 2}, {"layer 'norm' (LRN)", "lrn_param.local_size 0"});
  expect_error("", {2, 3, 4}, {"layer 'norm' (LRN)", "4-d", "2 3 4 (24)"});
}

}  // namespace
}  // namespace crema
