#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "layers/neuron/bias.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter BiasParam(const std::string& bias_param) {
  return test::ParseLayer("name: 'bias' type: 'Bias' bias_param { " + bias_param + " }");
}

// top[o, d, i] = x[o, d, i] + b[d], in double.
std::vector<double> Reference(const Blob& x, const Blob& bias, int outer, int inner) {
  const int dim = bias.count();
  std::vector<double> out(x.count());
  for (int o = 0; o < outer; ++o)
    for (int d = 0; d < dim; ++d)
      for (int i = 0; i < inner; ++i) {
        const int j = (o * dim + d) * inner + i;
        out[j] = static_cast<double>(x.cpu_data()[j]) + bias.cpu_data()[d];
      }
  return out;
}

struct Case {
  std::string param;
  std::vector<int> shape;
  std::vector<int> bias_shape;
  int outer, inner;
};

const Case kCases[] = {
    {"", {2, 3, 2, 2}, {3}, 2, 4},
    {"axis: 0 num_axes: 2", {2, 3, 2}, {2, 3}, 1, 2},
    {"axis: -2 num_axes: -1", {2, 3, 2, 2}, {2, 2}, 6, 1},
    {"num_axes: 0", {2, 3, 2}, {}, 1, 12},
};

TEST(BiasLayerTest, LearnedBiasForwardAndGradients) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(c.shape), 0.f, 1.f, 71);
    top.Add({});
    BiasLayer layer(BiasParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(layer.params().size(), 1u);
    ASSERT_EQ(layer.params()[0]->shape(), c.bias_shape);
    for (float v : test::DataOf(*layer.params()[0])) EXPECT_EQ(v, 0.f);  // default filler: constant 0
    test::FillGaussian(layer.params()[0].get(), 0.f, 1.f, 72);
    layer.Forward(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), c.shape);
    const auto expected = Reference(*bottom.pointers[0], *layer.params()[0], c.outer, c.inner);
    for (int i = 0; i < top.pointers[0]->count(); ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5);
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(BiasLayerTest, FillerAndSecondBottom) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}), 0.f, 1.f, 73);
  top.Add({});
  BiasLayer filled(BiasParam("filler { type: 'constant' value: 3 }"));
  filled.SetUp(bottom.pointers, top.pointers);
  for (float v : test::DataOf(*filled.params()[0])) EXPECT_EQ(v, 3.f);

  test::FillGaussian(bottom.Add({3, 4}), 0.f, 1.f, 74);
  BiasLayer layer(BiasParam("num_axes: 1"));  // num_axes is ignored with two bottoms
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.params().empty());
  layer.Forward(bottom.pointers, top.pointers);
  const auto expected = Reference(*bottom.pointers[0], *bottom.pointers[1], 2, 1);
  for (int i = 0; i < 24; ++i) EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-5);
  test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(BiasLayerTest, InPlaceAndStoredBias) {
  test::BlobList bottom;
  test::FillGaussian(bottom.Add({2, 3}), 0.f, 1.f, 75);
  const std::vector<float> x = test::DataOf(*bottom.pointers[0]);
  LayerParameter param = BiasParam("");
  Blob stored({1, 1, 1, 3});
  for (int i = 0; i < 3; ++i) stored.mutable_cpu_data()[i] = static_cast<float>(i);
  stored.ToProto(param.add_blobs());
  BiasLayer layer(param);
  layer.SetUp(bottom.pointers, bottom.pointers);
  EXPECT_EQ(layer.params()[0]->shape(), std::vector<int>{3});
  layer.Forward(bottom.pointers, bottom.pointers);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(bottom.pointers[0]->cpu_data()[i], x[i] + i % 3, 1e-6);
  for (int i = 0; i < 6; ++i) bottom.pointers[0]->mutable_cpu_diff()[i] = static_cast<float>(i);
  layer.params()[0]->set_diff(0.f);
  layer.Backward(bottom.pointers, {true}, bottom.pointers);
  EXPECT_EQ(test::DiffOf(*bottom.pointers[0]), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(test::DiffOf(*layer.params()[0]), (std::vector<float>{3, 5, 7}));
}

// The GPU code, rehearsed on the host (Context::set_gpu_code_on_host), gives in place what it gives out of place
// (the conformance harness checks it out of place against the CPU code).
TEST(BiasLayerTest, GpuCodeInPlaceMatchesOutOfPlace) {
  auto context = std::make_shared<Context>();
  context->set_gpu_code_on_host(true);
  BiasLayer separate(BiasParam("filler { type: 'gaussian' }"), context),
      in_place(BiasParam("filler { type: 'gaussian' }"), context);
  test::ExpectInPlaceMatchesOutOfPlace(&separate, &in_place, test::Gaussian(), {2, 3, 4});
}

void ExpectSetUpError(const LayerParameter& param, const std::vector<std::vector<int>>& shapes,
                      const std::vector<std::string>& parts) {
  test::BlobList bottom, top;
  for (const auto& shape : shapes) bottom.Add(shape);
  top.Add({});
  test::ExpectErrorContaining(
      [&] {
        BiasLayer layer(param);
        layer.SetUp(bottom.pointers, top.pointers);
      },
      parts);
}

TEST(BiasLayerTest, RejectsBadParametersAndShapes) {
  ExpectSetUpError(BiasParam("axis: -4"), {{2, 3, 2}}, {"layer 'bias' (Bias)", "bias_param.axis -4", "2 3 2 (12)"});
  ExpectSetUpError(BiasParam("num_axes: -3"), {{2, 3, 2}}, {"layer 'bias' (Bias)", "bias_param.num_axes -3"});
  ExpectSetUpError(BiasParam("axis: 2 num_axes: 2"), {{2, 3, 2}}, {"layer 'bias' (Bias)", "num_axes 2", "2 3 2 (12)"});
  ExpectSetUpError(BiasParam(""), {{2, 3, 2}, {3, 3}}, {"layer 'bias' (Bias)", "bias of shape 3 3 (9)", "2 3 2 (12)"});
  ExpectSetUpError(BiasParam(""), {{2, 3, 2}, {3, 2, 1}}, {"layer 'bias' (Bias)", "bias of shape 3 2 1 (6)"});
  LayerParameter stored = BiasParam("");
  Blob({2}).ToProto(stored.add_blobs());
  ExpectSetUpError(stored, {{2, 3}}, {"layer 'bias' (Bias)", "bias blob has shape 2 (2)", "3 (3)"});
}

}  // namespace
}  // namespace crema
