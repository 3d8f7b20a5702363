#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/inner_product.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::string LayerText(const std::string& ip_param) {
  return "name: 'ip' type: 'InnerProduct' inner_product_param { " + ip_param + " }";
}

// A layer under test on one bottom, with random weights and bias.
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<InnerProductLayer> layer;

  Fixture(const std::string& ip_param, const std::vector<int>& shape) {
    test::FillGaussian(bottom.Add(shape), 0.f, 1.f, 21);
    top.Add({});
    layer = std::make_unique<InnerProductLayer>(test::ParseLayer(LayerText(ip_param)));
    layer->SetUp(bottom.pointers, top.pointers);
    for (size_t i = 0; i < layer->params().size(); ++i) test::FillGaussian(layer->params()[i].get(), 0.f, 1.f, 5 + i);
  }
};

// out[m][n] = bias[n] + sum_k in[m][k] * W(n, k), with W stored N x K, or K x N when transposed.
std::vector<float> ReferenceProduct(const Blob& input, int M, int K, int N, const Blob& weights, const Blob* bias,
                                    bool transpose) {
  std::vector<float> out;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = bias ? bias->cpu_data()[n] : 0.0;
      for (int k = 0; k < K; ++k) {
        const float w = transpose ? weights.cpu_data()[k * N + n] : weights.cpu_data()[n * K + k];
        sum += static_cast<double>(input.cpu_data()[m * K + k]) * w;
      }
      out.push_back(static_cast<float>(sum));
    }
  return out;
}

struct Case {
  std::string param;
  std::vector<int> shape;
  std::vector<int> top_shape;
  int M, K;
  bool transpose;
};

const Case kCases[] = {
    {"num_output: 5", {3, 2, 3, 4}, {3, 5}, 3, 24, false},
    {"num_output: 5 transpose: true", {3, 2, 3, 4}, {3, 5}, 3, 24, true},
    {"num_output: 4 axis: 2", {3, 2, 3, 4}, {3, 2, 4}, 6, 12, false},
    {"num_output: 4 axis: -1 transpose: true", {3, 2, 3, 4}, {3, 2, 3, 4}, 18, 4, true},
    {"num_output: 3 axis: 0", {2, 5}, {3}, 1, 10, false},
    {"num_output: 6 bias_term: false", {4, 7}, {4, 6}, 4, 7, false},
};

TEST(InnerProductLayerTest, ForwardMatchesMatrixProduct) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    Fixture fixture(c.param, c.shape);
    const int N = c.top_shape.back();
    const std::vector<int> weight_shape = c.transpose ? std::vector<int>{c.K, N} : std::vector<int>{N, c.K};
    ASSERT_EQ(fixture.layer->params()[0]->shape(), weight_shape);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ASSERT_EQ(fixture.top.pointers[0]->shape(), c.top_shape);
    const Blob* bias = fixture.layer->params().size() > 1 ? fixture.layer->params()[1].get() : nullptr;
    const std::vector<float> expected =
        ReferenceProduct(*fixture.bottom.pointers[0], c.M, c.K, N, *fixture.layer->params()[0], bias, c.transpose);
    for (int i = 0; i < fixture.top.pointers[0]->count(); ++i)
      EXPECT_NEAR(fixture.top.pointers[0]->cpu_data()[i], expected[i], 1e-4f) << i;
  }
}

TEST(InnerProductLayerTest, Gradients) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    Fixture fixture(c.param, c.shape);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers);
  }
}

TEST(InnerProductLayerTest, ParameterGradientsAccumulate) {
  Fixture fixture("num_output: 3", {4, 5});
  Blob* top = fixture.top.pointers[0];
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  test::FillGaussian(top, 0.f, 1.f, 77);
  std::copy(top->cpu_data(), top->cpu_data() + top->count(), top->mutable_cpu_diff());
  for (auto& blob : fixture.layer->params()) blob->set_diff(0.f);
  fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
  std::vector<std::vector<float>> once;
  for (auto& blob : fixture.layer->params()) once.emplace_back(blob->cpu_diff(), blob->cpu_diff() + blob->count());
  const Blob& input = *fixture.bottom.pointers[0];
  const std::vector<float> bottom_once(input.cpu_diff(), input.cpu_diff() + input.count());
  fixture.layer->Backward(fixture.top.pointers, {true}, fixture.bottom.pointers);
  for (size_t b = 0; b < once.size(); ++b)
    for (size_t i = 0; i < once[b].size(); ++i)
      EXPECT_NEAR(fixture.layer->params()[b]->cpu_diff()[i], 2 * once[b][i], 1e-5f) << "blob " << b << " at " << i;
  for (int i = 0; i < input.count(); ++i) EXPECT_FLOAT_EQ(input.cpu_diff()[i], bottom_once[i]) << i;
}

TEST(InnerProductLayerTest, FillsParametersFromFillers) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  InnerProductLayer layer(test::ParseLayer(
      LayerText("num_output: 4 weight_filler { type: 'constant' value: 0.5 } bias_filler { type: 'constant' "
                "value: -1 }")));
  layer.SetUp(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(layer.params()[0]->cpu_data()[i], 0.5f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(layer.params()[1]->cpu_data()[i], -1.f);
}

TEST(InnerProductLayerTest, ReshapeChecksTheInputSize) {
  Fixture fixture("num_output: 2", {3, 4, 2});
  // Another batch size is fine.
  fixture.bottom.pointers[0]->Reshape({7, 4, 2});
  fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
  EXPECT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{7, 2}));
  // Another K is not: the error names the layer, both sizes and the shapes.
  fixture.bottom.pointers[0]->Reshape({7, 3, 2});
  const std::string message =
      test::ErrorMessage([&] { fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers); });
  EXPECT_EQ(message.find("layer 'ip' (InnerProduct)"), 0u) << message;
  EXPECT_NE(message.find("7 3 2 (42)"), std::string::npos) << message;
  EXPECT_NE(message.find("2 8 (16)"), std::string::npos) << message;
}

TEST(InnerProductLayerTest, KeepsParametersLoadedWithTheLayer) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  LayerParameter param = test::ParseLayer(LayerText("num_output: 4 weight_filler { type: 'gaussian' }"));
  // A legacy file stores the weights as 4-d (1, 1, N, K).
  Blob weights({1, 1, 4, 3}), bias({4});
  test::FillGaussian(&weights, 0.f, 1.f, 8);
  test::FillGaussian(&bias, 0.f, 1.f, 9);
  weights.ToProto(param.add_blobs());
  bias.ToProto(param.add_blobs());
  InnerProductLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(layer.params()[0]->shape(), (std::vector<int>{4, 3}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(layer.params()[0]->cpu_data()[i], weights.cpu_data()[i]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(layer.params()[1]->cpu_data()[i], bias.cpu_data()[i]);

  // The same weights do not fit a transposed layer.
  LayerParameter transposed = param;
  transposed.mutable_inner_product_param()->set_transpose(true);
  InnerProductLayer mismatched(transposed);
  const std::string message = test::ErrorMessage([&] { mismatched.SetUp(bottom.pointers, top.pointers); });
  EXPECT_EQ(message.find("layer 'ip' (InnerProduct)"), 0u) << message;
  EXPECT_NE(message.find("weights"), std::string::npos) << message;
  EXPECT_NE(message.find("1 1 4 3 (12)"), std::string::npos) << message;
  EXPECT_NE(message.find("3 4 (12)"), std::string::npos) << message;
  // Nor does a layer without bias.
  LayerParameter no_bias = param;
  no_bias.mutable_inner_product_param()->set_bias_term(false);
  InnerProductLayer extra(no_bias);
  EXPECT_NE(test::ErrorMessage([&] { extra.SetUp(bottom.pointers, top.pointers); }).find("bias_term"),
            std::string::npos);
}

TEST(InnerProductLayerTest, RejectsBadParameters) {
  for (const auto& c : std::vector<std::pair<std::string, std::string>>{{"", "num_output"},
                                                                        {"num_output: 0", "num_output"},
                                                                        {"num_output: 2 axis: 3", "axis"},
                                                                        {"num_output: 2 axis: -4", "axis"}}) {
    SCOPED_TRACE(c.first);
    test::BlobList bottom, top;
    bottom.Add({2, 3, 4});
    top.Add({});
    InnerProductLayer layer(test::ParseLayer(LayerText(c.first)));
    const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
    EXPECT_EQ(message.find("layer 'ip' (InnerProduct)"), 0u) << message;
    EXPECT_NE(message.find(c.second), std::string::npos) << message;
  }
  // One bottom, one top.
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  InnerProductLayer layer(test::ParseLayer(LayerText("num_output: 2")));
  EXPECT_THROW(layer.SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
