#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "layers/neuron/scale.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ScaleParam(const std::string& scale_param) {
  return test::ParseLayer("name: 'scale' type: 'Scale' scale_param { " + scale_param + " }");
}

struct Case {
  std::string param;
  std::vector<int> shape;
  std::vector<int> scale_shape;
  int outer, inner;
};

const Case kCases[] = {
    {"", {2, 3, 2, 2}, {3}, 2, 4},
    {"axis: 0 num_axes: 2 bias_term: true", {2, 3, 2}, {2, 3}, 1, 2},
    {"axis: -2 num_axes: -1 bias_term: true", {2, 3, 2, 2}, {2, 2}, 6, 1},
    {"num_axes: 0 bias_term: true", {2, 3, 2}, {}, 1, 12},
    {"axis: 2 num_axes: 1", {2, 2, 3}, {3}, 4, 1},
};

// top[o, d, i] = x[o, d, i] * s[d] + b[d], in double.
std::vector<double> Reference(const Blob& x, const Blob& scale, const Blob* bias, int outer, int inner) {
  const int dim = scale.count();
  std::vector<double> out(x.count());
  for (int o = 0; o < outer; ++o)
    for (int d = 0; d < dim; ++d)
      for (int i = 0; i < inner; ++i) {
        const int j = (o * dim + d) * inner + i;
        out[j] = static_cast<double>(x.cpu_data()[j]) * scale.cpu_data()[d] + (bias ? bias->cpu_data()[d] : 0.0);
      }
  return out;
}

TEST(ScaleLayerTest, LearnedScaleForwardAndDefaults) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(c.shape), 0.f, 1.f, 31);
    top.Add({});
    ScaleLayer layer(ScaleParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    const bool bias = c.param.find("bias_term") != std::string::npos;
    ASSERT_EQ(layer.params().size(), bias ? 2u : 1u);
    ASSERT_EQ(layer.params()[0]->shape(), c.scale_shape);
    // Default fillers: scale 1, bias 0.
    for (float v : test::DataOf(*layer.params()[0])) EXPECT_EQ(v, 1.f);
    if (bias) {
      ASSERT_EQ(layer.params()[1]->shape(), c.scale_shape);
      for (float v : test::DataOf(*layer.params()[1])) EXPECT_EQ(v, 0.f);
    }
    for (size_t b = 0; b < layer.params().size(); ++b) test::FillGaussian(layer.params()[b].get(), 0.f, 1.f, 40 + b);
    layer.Forward(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), c.shape);
    const auto expected =
        Reference(*bottom.pointers[0], *layer.params()[0], bias ? layer.params()[1].get() : nullptr, c.outer, c.inner);
    for (int i = 0; i < top.pointers[0]->count(); ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5);
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(ScaleLayerTest, FillerIsUsedWhenGiven) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  ScaleLayer layer(
      ScaleParam("filler { type: 'constant' value: 2.5 } bias_term: true bias_filler { type: 'constant' value: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  for (float v : test::DataOf(*layer.params()[0])) EXPECT_EQ(v, 2.5f);
  for (float v : test::DataOf(*layer.params()[1])) EXPECT_EQ(v, -1.f);
}

TEST(ScaleLayerTest, SecondBottomIsTheScale) {
  for (const std::string param : {"axis: 1", "axis: 1 bias_term: true", "axis: -1 bias_term: true"}) {
    SCOPED_TRACE(param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4}), 0.f, 1.f, 32);
    const bool last = param.find("-1") != std::string::npos;
    // num_axes is ignored: the second bottom's shape counts.
    test::FillGaussian(bottom.Add(last ? std::vector<int>{4} : std::vector<int>{3, 4}), 0.f, 1.f, 33);
    top.Add({});
    ScaleLayer layer(ScaleParam(param));
    layer.SetUp(bottom.pointers, top.pointers);
    const bool bias = param.find("bias_term") != std::string::npos;
    ASSERT_EQ(layer.params().size(), bias ? 1u : 0u);
    if (bias) test::FillGaussian(layer.params()[0].get(), 0.f, 1.f, 34);
    layer.Forward(bottom.pointers, top.pointers);
    const auto expected =
        Reference(*bottom.pointers[0], *bottom.pointers[1], bias ? layer.params()[0].get() : nullptr, last ? 6 : 2, 1);
    for (int i = 0; i < top.pointers[0]->count(); ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5);
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(ScaleLayerTest, InPlaceMatchesOutOfPlace) {
  test::BlobList bottom, top, in_place;
  test::FillGaussian(bottom.Add({2, 3, 2}), 0.f, 1.f, 35);
  top.Add({});
  test::FillGaussian(in_place.Add({2, 3, 2}), 0.f, 1.f, 35);
  ScaleLayer a(ScaleParam("bias_term: true")), b(ScaleParam("bias_term: true"));
  a.SetUp(bottom.pointers, top.pointers);
  b.SetUp(in_place.pointers, in_place.pointers);
  ASSERT_EQ(b.internal_blobs().size(), 1u);
  for (size_t i = 0; i < 2; ++i) {
    test::FillGaussian(a.params()[i].get(), 0.f, 1.f, 50 + i);
    test::FillGaussian(b.params()[i].get(), 0.f, 1.f, 50 + i);
    a.params()[i]->set_diff(0.f);
    b.params()[i]->set_diff(0.f);
  }
  a.Forward(bottom.pointers, top.pointers);
  b.Forward(in_place.pointers, in_place.pointers);
  EXPECT_EQ(test::DataOf(*top.pointers[0]), test::DataOf(*in_place.pointers[0]));
  test::FillGaussian(top.pointers[0], 0.f, 1.f, 60);
  std::copy(top.pointers[0]->cpu_data(), top.pointers[0]->cpu_data() + 12, top.pointers[0]->mutable_cpu_diff());
  std::copy(top.pointers[0]->cpu_data(), top.pointers[0]->cpu_data() + 12, in_place.pointers[0]->mutable_cpu_diff());
  a.Backward(top.pointers, {true}, bottom.pointers);
  b.Backward(in_place.pointers, {true}, in_place.pointers);
  EXPECT_EQ(test::DiffOf(*bottom.pointers[0]), test::DiffOf(*in_place.pointers[0]));
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(test::DiffOf(*a.params()[i]), test::DiffOf(*b.params()[i]));
}

// The GPU code, rehearsed on the host (Context::set_gpu_code_on_host), gives in place what it gives out of place
// (the conformance harness checks it out of place against the CPU code): the input kept for the scale's gradient,
// and the gradients taken before the bottom's overwrites the top's.
TEST(ScaleLayerTest, GpuCodeInPlaceMatchesOutOfPlace) {
  for (const char* param : {"bias_term: true filler { type: 'gaussian' } bias_filler { type: 'gaussian' }",
                            "axis: 0 num_axes: 2 filler { type: 'gaussian' }"}) {
    SCOPED_TRACE(param);
    auto context = std::make_shared<Context>();
    context->set_gpu_code_on_host(true);
    ScaleLayer separate(ScaleParam(param), context), in_place(ScaleParam(param), context);
    test::ExpectInPlaceMatchesOutOfPlace(&separate, &in_place, test::Gaussian(), {2, 3, 4});
  }
}

TEST(ScaleLayerTest, StoredBlobsLoad) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2}));
  top.Add({});
  LayerParameter param = ScaleParam("bias_term: true");
  Blob scale({1, 1, 1, 3}), bias({3});
  scale.set_data(2.f);
  bias.set_data(0.5f);
  scale.ToProto(param.add_blobs());
  bias.ToProto(param.add_blobs());
  ScaleLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(layer.params()[0]->shape(), std::vector<int>{3});
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i)
    EXPECT_NEAR(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i] * 2.0 + 0.5, 1e-6);
}

void ExpectSetUpError(const LayerParameter& param, const std::vector<std::vector<int>>& shapes,
                      const std::vector<std::string>& parts) {
  test::BlobList bottom, top;
  for (const auto& shape : shapes) bottom.Add(shape);
  top.Add({});
  test::ExpectErrorContaining(
      [&] {
        ScaleLayer layer(param);
        layer.SetUp(bottom.pointers, top.pointers);
      },
      parts);
}

TEST(ScaleLayerTest, RejectsBadParametersAndShapes) {
  ExpectSetUpError(ScaleParam("axis: 3"), {{2, 3, 2}}, {"layer 'scale' (Scale)", "scale_param.axis 3", "2 3 2 (12)"});
  ExpectSetUpError(ScaleParam("num_axes: -2"), {{2, 3, 2}}, {"layer 'scale' (Scale)", "scale_param.num_axes -2"});
  ExpectSetUpError(ScaleParam("axis: 1 num_axes: 3"), {{2, 3, 2}},
                   {"layer 'scale' (Scale)", "num_axes 3", "2 3 2 (12)"});
  ExpectSetUpError(ScaleParam("axis: 1"), {{2, 3, 2}, {2, 2}},
                   {"layer 'scale' (Scale)", "scale of shape 2 2 (4)", "2 3 2 (12)"});
  ExpectSetUpError(ScaleParam("axis: 2"), {{2, 3, 2}, {2, 2}},
                   {"layer 'scale' (Scale)", "scale of shape 2 2 (4)", "2 3 2 (12)"});
  ExpectSetUpError(ScaleParam(""), {{2, 3}, {3}, {3}}, {"layer 'scale' (Scale)", "at most 2 bottom"});
  LayerParameter stored = ScaleParam("bias_term: true");
  Blob({3}).ToProto(stored.add_blobs());
  ExpectSetUpError(stored, {{2, 3}}, {"layer 'scale' (Scale)", "1 blob(s)", "needs 2", "bias_term is true"});
  LayerParameter wrong = ScaleParam("");
  Blob({4}).ToProto(wrong.add_blobs());
  ExpectSetUpError(wrong, {{2, 3}}, {"layer 'scale' (Scale)", "scale blob has shape 4 (4)", "3 (3)"});
}

}  // namespace
}  // namespace crema
