// Layers that read and write blobs in layouts other than plain (core/layout.hpp) give, in every layout, the
// results their plain runs give: the outputs, the bottoms' gradients and the parameters' gradients, reordered back
// to plain. The engines are compared with the native ones running plain, so a wrong channel index in a layout
// is off by the size of the values themselves. Together with ExamplesTest.LayoutRunsGiveThePlainNetsOutputs-
// AndGradients (whole nets), these cover each layer on its own: in place and not, each layout the layer takes,
// mixed layouts where it takes them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Where value (n, c, hw) of an N x C x H x W blob lies in `layout`, written out for each layout on its own.
size_t OffsetIn(Layout layout, const std::vector<int>& shape, int n, int c, int hw) {
  const size_t channels = shape[1], positions = static_cast<size_t>(shape[2]) * shape[3];
  switch (layout) {
    case Layout::kPlain:
      return (n * channels + c) * positions + hw;
    case Layout::kChannelsLast:
      return (n * positions + hw) * channels + c;
    case Layout::kChannelBlocks8:
      return ((n * (channels / 8) + c / 8) * positions + hw) * 8 + c % 8;
    case Layout::kChannelBlocks16:
      return ((n * (channels / 16) + c / 16) * positions + hw) * 16 + c % 16;
  }
  return 0;
}

// Reorders plain values of a 4-d `shape` into `layout` (to_layout) or back.
std::vector<float> Reorder(const std::vector<float>& from, const std::vector<int>& shape, Layout layout,
                           bool to_layout) {
  std::vector<float> to(from.size());
  const int positions = shape[2] * shape[3];
  for (int n = 0; n < shape[0]; ++n)
    for (int c = 0; c < shape[1]; ++c)
      for (int hw = 0; hw < positions; ++hw) {
        const size_t plain = OffsetIn(Layout::kPlain, shape, n, c, hw), other = OffsetIn(layout, shape, n, c, hw);
        if (to_layout) {
          to[other] = from[plain];
        } else {
          to[plain] = from[other];
        }
      }
  return to;
}

struct LayoutRun {
  std::string engine;
  std::vector<Layout> bottom_layouts;  // one per bottom
  Layout top_layout = Layout::kPlain;
  bool in_place = false;  // top 0 is bottom 0
};

// Runs layer `text` (one top, 4-d bottoms of `shapes` drawn from `seed`) as `run` says, with top gradients drawn
// from the seed too and the parameters as the layer fills them from the context's seed; returns, in plain order,
// the top's data, then the bottoms' and the parameters' gradients, and the parameters' data after forward (the
// running statistics of BatchNorm).
// With `step`, the inputs are rounded to multiples of it, so that windows and sums meet equal values.
std::vector<std::vector<float>> RunLayer(const std::string& text, const std::vector<std::vector<int>>& shapes,
                                         const LayoutRun& run, uint64_t seed, float step = 0.f) {
  auto context = std::make_shared<Context>(Device::kCPU, 0, 11);
  LayerParameter param = test::ParseLayer(text);
  context->force_engine(param.type(), run.engine);
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
  EXPECT_EQ(layer->engine(), run.engine);
  test::BlobList bottom, top;
  std::vector<std::vector<float>> inputs;
  for (size_t b = 0; b < shapes.size(); ++b) {
    Blob* blob = bottom.Add(shapes[b]);
    test::FillGaussian(blob, 0.5f, 1.5f, seed + b);
    if (step > 0.f)
      for (int i = 0; i < blob->count(); ++i)
        blob->mutable_cpu_data()[i] = step * std::round(blob->cpu_data()[i] / step);
    inputs.push_back(test::DataOf(*blob));
  }
  if (run.in_place) {
    top.pointers.push_back(bottom.pointers[0]);
  } else {
    top.Add({});
  }
  layer->SetUp(bottom.pointers, top.pointers);
  if (param.type() == "BatchNorm") {  // stored statistics, for use_global_stats
    test::FillGaussian(layer->params()[0].get(), 0.f, 1.f, 21);
    test::FillUniform(layer->params()[1].get(), 0.5f, 2.f, 22);
    layer->params()[2]->mutable_cpu_data()[0] = 2.f;
  }
  // As the net's plan does: the layouts are set, and the layer reshaped in them, before any data flows.
  for (size_t b = 0; b < shapes.size(); ++b) {
    EXPECT_TRUE(layer->ReadsLayout(static_cast<int>(b), run.bottom_layouts[b])) << b;
    bottom.pointers[b]->set_layout(run.bottom_layouts[b]);
    const std::vector<float> values = Reorder(inputs[b], shapes[b], run.bottom_layouts[b], true);
    std::copy(values.begin(), values.end(), bottom.pointers[b]->mutable_cpu_data());
  }
  if (!run.in_place) top.pointers[0]->set_layout(run.top_layout);
  layer->Reshape(bottom.pointers, top.pointers);
  for (auto& blob : layer->params()) blob->set_diff(0.f);
  layer->Forward(bottom.pointers, top.pointers);
  Blob* out = top.pointers[0];
  std::vector<std::vector<float>> results = {Reorder(test::DataOf(*out), out->shape(), out->layout(), false)};
  Blob gradient(out->shape());
  test::FillGaussian(&gradient, 0.f, 1.f, seed + 100);
  const std::vector<float> diff = Reorder(test::DataOf(gradient), out->shape(), out->layout(), true);
  std::copy(diff.begin(), diff.end(), out->mutable_cpu_diff());
  layer->Backward(top.pointers, std::vector<bool>(shapes.size(), true), bottom.pointers);
  for (Blob* b : bottom.pointers) results.push_back(Reorder(test::DiffOf(*b), b->shape(), b->layout(), false));
  for (auto& blob : layer->params()) {
    results.push_back(test::DiffOf(*blob));
    results.push_back(test::DataOf(*blob));
  }
  return results;
}

void ExpectSame(const std::vector<std::vector<float>>& actual, const std::vector<std::vector<float>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t r = 0; r < actual.size(); ++r) {
    ASSERT_EQ(actual[r].size(), expected[r].size()) << "result " << r;
    float largest = 0.f;
    for (float v : expected[r]) largest = std::max(largest, std::abs(v));
    for (size_t i = 0; i < actual[r].size(); ++i)
      ASSERT_NEAR(actual[r][i], expected[r][i], 1e-4f * largest + 1e-6f) << "result " << r << " at " << i;
  }
}

const Layout kLayouts[] = {Layout::kPlain, Layout::kChannelsLast, Layout::kChannelBlocks8, Layout::kChannelBlocks16};

TEST(LayoutTest, ScaleGivesThePlainResultsInEveryLayout) {
  const std::vector<int> shape = {3, 32, 3, 5};
  const std::string scale =
      "name: 'scale' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }";
  for (bool in_place : {false, true}) {
    const auto expected = RunLayer(scale, {shape}, {"native", {Layout::kPlain}, Layout::kPlain, in_place}, 5);
    for (Layout layout : kLayouts) {
      SCOPED_TRACE(LayoutName(layout) + (in_place ? ", in place" : ""));
      ExpectSame(RunLayer(scale, {shape}, {"native", {layout}, layout, in_place}, 5), expected);
    }
  }
}

#ifdef CREMA_USE_ONEDNN

TEST(LayoutTest, OneDnnBatchNormGivesTheNativeResultsInEveryLayout) {
  const std::vector<int> shape = {4, 32, 3, 5};
  for (const char* stats : {"", "use_global_stats: true"}) {
    const std::string bn = std::string("name: 'bn' type: 'BatchNorm' batch_norm_param { eps: 0.001 ") + stats + " }";
    for (bool in_place : {false, true}) {
      const auto expected = RunLayer(bn, {shape}, {"native", {Layout::kPlain}, Layout::kPlain, in_place}, 7);
      for (Layout layout : kLayouts) {
        SCOPED_TRACE(LayoutName(layout) + (in_place ? ", in place " : " ") + stats);
        ExpectSame(RunLayer(bn, {shape}, {"onednn", {layout}, layout, in_place}, 7), expected);
      }
      // Out of place, the top may stay plain (a net output) while the bottom comes in a run's layout.
      if (!in_place) {
        ExpectSame(RunLayer(bn, {shape}, {"onednn", {Layout::kChannelBlocks16}, Layout::kPlain, false}, 7), expected);
      }
    }
  }
}

TEST(LayoutTest, OneDnnEltwiseSumGivesTheNativeResultsInMixedLayouts) {
  const std::vector<int> shape = {2, 16, 4, 3};
  const std::string sum = "name: 'sum' type: 'Eltwise' eltwise_param { operation: SUM coeff: 0.5 coeff: -2 coeff: 1 }";
  const std::vector<std::vector<int>> shapes = {shape, shape, shape};
  const LayoutRun plain{"native", {Layout::kPlain, Layout::kPlain, Layout::kPlain}, Layout::kPlain, false};
  const auto expected = RunLayer(sum, shapes, plain, 9);
  const std::vector<LayoutRun> runs = {
      {"onednn", {Layout::kPlain, Layout::kPlain, Layout::kPlain}, Layout::kPlain, false},
      {"onednn", {Layout::kChannelBlocks16, Layout::kChannelBlocks16, Layout::kChannelBlocks16},
       Layout::kChannelBlocks16, false},
      {"onednn", {Layout::kChannelBlocks16, Layout::kPlain, Layout::kChannelsLast}, Layout::kChannelBlocks8, false},
      {"onednn", {Layout::kPlain, Layout::kChannelBlocks8, Layout::kPlain}, Layout::kPlain, false},
  };
  for (const LayoutRun& run : runs) {
    SCOPED_TRACE(LayoutName(run.bottom_layouts[0]) + ", " + LayoutName(run.bottom_layouts[1]) + ", " +
                 LayoutName(run.bottom_layouts[2]) + " -> " + LayoutName(run.top_layout));
    ExpectSame(RunLayer(sum, shapes, run, 9), expected);
  }
}

// MAX pooling of a bottom in channel blocks or channels-last runs crema's loops over the channels side by side
// (layers/vision/pooling_lanes.hpp): the native engine's outputs and gradients bit for bit, equal maxima included
// (the inputs rounded to tenths: the first of them wins, as natively), over windows clipped at the edges, a last
// window past the input (CEIL), rectangular ones, a global one, and a stride past the kernel (inputs in no window get
// no gradient); channels-last over 20 channels, whose last vector is partial.
TEST(LayoutTest, OneDnnMaxPoolingGivesTheNativeResultsBitForBitInEveryLayout) {
  const std::pair<std::string, std::vector<int>> cases[] = {
      {"kernel_size: 3 stride: 1 pad: 1", {2, 32, 7, 9}},
      {"kernel_size: 3 stride: 2", {2, 32, 10, 11}},
      {"kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1", {1, 16, 6, 5}},
      {"global_pooling: true", {2, 16, 5, 6}},
      {"kernel_size: 2 stride: 3", {2, 16, 8, 8}},
      {"kernel_size: 3 stride: 2 pad: 1", {3, 20, 9, 7}},
  };
  for (const auto& c : cases) {
    const std::string pool = "name: 'pool' type: 'Pooling' pooling_param { pool: MAX " + c.first + " }";
    const auto expected = RunLayer(pool, {c.second}, {"native", {Layout::kPlain}, Layout::kPlain, false}, 13, 0.1f);
    for (Layout layout : kLayouts) {
      if (c.second[1] % ChannelBlock(layout, c.second[1]) != 0) continue;
      SCOPED_TRACE(LayoutName(layout) + ": " + c.first);
      const auto actual = RunLayer(pool, {c.second}, {"onednn", {layout}, layout, false}, 13, 0.1f);
      ASSERT_EQ(actual.size(), expected.size());
      // Planned for forward alone, the maxima are not recorded (none kept) and the outputs are the same.
      {
        auto context = std::make_shared<Context>(Device::kCPU, 0, 11);
        context->force_engine("Pooling", "onednn");
        std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(test::ParseLayer(pool), {c.second}, context);
        layer->set_backward_planned(false);
        test::BlobList bottom, top;
        Blob* input = bottom.Add(c.second);
        top.Add({});
        layer->SetUp(bottom.pointers, top.pointers);
        Blob values(c.second);
        test::FillGaussian(&values, 0.5f, 1.5f, 13);
        const std::vector<float> plain = test::DataOf(values), in_layout = Reorder(plain, c.second, layout, true);
        input->set_layout(layout);
        std::copy(in_layout.begin(), in_layout.end(), input->mutable_cpu_data());
        top.pointers[0]->set_layout(layout);
        layer->Reshape(bottom.pointers, top.pointers);
        for (const auto& internal : layer->internal_blobs()) EXPECT_EQ(internal->count(), 0) << "kept for no backward";
        layer->Forward(bottom.pointers, top.pointers);
        const auto forward_only = RunLayer(pool, {c.second}, {"native", {Layout::kPlain}, Layout::kPlain, false}, 13);
        const std::vector<float> got = Reorder(test::DataOf(*top.pointers[0]), top.pointers[0]->shape(), layout, false);
        ASSERT_EQ(got, forward_only[0]);
      }
      if (layout == Layout::kPlain) {  // oneDNN's own kernels: a gradient may go to another of equal maxima
        ExpectSame({actual[0]}, {expected[0]});
        continue;
      }
      for (size_t r = 0; r < actual.size(); ++r) {
        ASSERT_EQ(actual[r].size(), expected[r].size());
        for (size_t i = 0; i < actual[r].size(); ++i)
          ASSERT_EQ(actual[r][i], expected[r][i]) << "result " << r << " at " << i;
      }
    }
  }
}

#endif  // CREMA_USE_ONEDNN

}  // namespace
}  // namespace crema
