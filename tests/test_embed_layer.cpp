#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/context.hpp"
#include "layers/common/embed.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<EmbedLayer> layer;
  explicit Fixture(const std::string& param, const std::vector<float>& indices, const std::vector<int>& shape) {
    Blob* in = bottom.Add(shape);
    std::copy(indices.begin(), indices.end(), in->mutable_cpu_data());
    top.Add({});
    layer = std::make_unique<EmbedLayer>(test::ParseLayer("name: 'e' type: 'Embed' embed_param { " + param + " }"));
    layer->SetUp(bottom.pointers, top.pointers);
    for (size_t i = 0; i < layer->params().size(); ++i) test::FillGaussian(layer->params()[i].get(), 0.f, 1.f, 3 + i);
  }
};

TEST(EmbedLayerTest, EachIndexSelectsARowPlusTheBias) {
  Fixture fixture("num_output: 3 input_dim: 5", {4, 0, 2, 2, 1, 4}, {3, 2});
  EXPECT_EQ(fixture.layer->params()[0]->shape(), (std::vector<int>{5, 3}));
  EXPECT_EQ(fixture.layer->params()[1]->shape(), (std::vector<int>{3}));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{3, 2, 3}));
  const float* weights = fixture.layer->params()[0]->cpu_data();
  const float* bias = fixture.layer->params()[1]->cpu_data();
  const float indices[] = {4, 0, 2, 2, 1, 4};
  for (int i = 0; i < 6; ++i)
    for (int o = 0; o < 3; ++o)
      EXPECT_FLOAT_EQ(fixture.top.pointers[0]->cpu_data()[i * 3 + o],
                      weights[static_cast<int>(indices[i]) * 3 + o] + bias[o]);
}

TEST(EmbedLayerTest, ParameterGradients) {
  for (const char* param : {"num_output: 4 input_dim: 3", "num_output: 2 input_dim: 6 bias_term: false"}) {
    SCOPED_TRACE(param);
    Fixture fixture(param, {2, 0, 2, 1, 0}, {5});
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, -2);
  }
}

// The GPU code's weight gradient (each used row gathering from its positions, listed on the host) adds to what
// the diff already holds, in the CPU's order: rehearsed on the host, two backward passes give the CPU's sums.
TEST(EmbedLayerTest, GpuCodeAccumulatesTheCpuGradients) {
  const std::vector<float> indices = {2, 0, 2, 1, 0, 2, 4};
  std::vector<std::vector<float>> results[2];
  for (int gpu_code = 0; gpu_code < 2; ++gpu_code) {
    auto context = std::make_shared<Context>(Device::kCPU);
    context->set_gpu_code_on_host(gpu_code == 1);
    test::BlobList bottom, top;
    Blob* in = bottom.Add({7});
    std::copy(indices.begin(), indices.end(), in->mutable_cpu_data());
    top.Add({});
    EmbedLayer layer(test::ParseLayer("name: 'e' type: 'Embed' embed_param { num_output: 3 input_dim: 6 }"), context);
    layer.SetUp(bottom.pointers, top.pointers);
    // The GPU code's backward builds its list in a workspace the plan sees: at most 6 rows used (and their offsets,
    // and one more) and the 7 positions.
    EXPECT_EQ(layer.workspace_floats(), gpu_code == 1 ? 2u * 6 + 1 + 7 : 0u);
    for (size_t i = 0; i < layer.params().size(); ++i) {
      test::FillGaussian(layer.params()[i].get(), 0.f, 1.f, 3 + i);
      layer.params()[i]->set_diff(0.5f);
    }
    layer.Forward(bottom.pointers, top.pointers);
    for (int i = 0; i < top.pointers[0]->count(); ++i) top.pointers[0]->mutable_cpu_diff()[i] = 0.25f * i - 2.f;
    layer.Backward(top.pointers, {false}, bottom.pointers);
    layer.Backward(top.pointers, {false}, bottom.pointers);
    results[gpu_code] = {test::DataOf(*top.pointers[0]), test::DiffOf(*layer.params()[0]),
                         test::DiffOf(*layer.params()[1])};
  }
  // Rows 3 and 5 were picked by no one: their gradient stays at the starting 0.5.
  EXPECT_EQ(results[1][1][3 * 3], 0.5f);
  EXPECT_EQ(results[1][1][5 * 3 + 2], 0.5f);
  for (size_t r = 0; r < results[0].size(); ++r) {
    ASSERT_EQ(results[0][r].size(), results[1][r].size());
    for (size_t i = 0; i < results[0][r].size(); ++i)
      EXPECT_FLOAT_EQ(results[1][r][i], results[0][r][i]) << r << ", " << i;
  }
}

// A fractional index is truncated toward zero, as Caffe does (2.7 picks row 2, -0.5 row 0), by the CPU code and the
// GPU code rehearsed on the host alike, with one warning for the layer naming the first.
TEST(EmbedLayerTest, FractionalIndicesAreTruncatedWithOneWarning) {
  const std::vector<float> indices = {2.7f, -0.5f, 1.f, 2.2f};
  for (int gpu_code = 0; gpu_code < 2; ++gpu_code) {
    SCOPED_TRACE(gpu_code);
    auto context = std::make_shared<Context>(Device::kCPU);
    context->set_gpu_code_on_host(gpu_code == 1);
    test::BlobList bottom, top;
    Blob* in = bottom.Add({4});
    std::copy(indices.begin(), indices.end(), in->mutable_cpu_data());
    top.Add({});
    EmbedLayer layer(test::ParseLayer("name: 'e' type: 'Embed' embed_param { num_output: 3 input_dim: 4 "
                                      "bias_term: false }"), context);
    layer.SetUp(bottom.pointers, top.pointers);
    test::FillGaussian(layer.params()[0].get(), 0.f, 1.f, 3);
    test::LoggedWarnings warnings;
    layer.Forward(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    const int rows[] = {2, 0, 1, 2};
    for (int i = 0; i < 4; ++i)
      for (int o = 0; o < 3; ++o)
        EXPECT_EQ(top.pointers[0]->cpu_data()[i * 3 + o], layer.params()[0]->cpu_data()[rows[i] * 3 + o]);
    top.pointers[0]->set_diff(1.f);
    layer.params()[0]->set_diff(0.f);
    layer.Backward(top.pointers, {false}, bottom.pointers);
    EXPECT_EQ(layer.params()[0]->cpu_diff()[2 * 3], 2.f);
    EXPECT_EQ(layer.params()[0]->cpu_diff()[3 * 3], 0.f);
    ASSERT_EQ(warnings.lines().size(), 1u);
    for (const char* part : {"layer 'e' (Embed)", "index 2.7", "position 0", "read as 2", "as Caffe does"})
      EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
  }
}

TEST(EmbedLayerTest, BadParametersAndIndicesAreNamed) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  EmbedLayer no_dim(test::ParseLayer("name: 'e' type: 'Embed' embed_param { num_output: 2 }"));
  test::ExpectErrorContaining([&] { no_dim.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'e' (Embed)", "embed_param.input_dim"});
  EmbedLayer no_output(test::ParseLayer("name: 'e' type: 'Embed' embed_param { input_dim: 2 }"));
  test::ExpectErrorContaining([&] { no_output.SetUp(bottom.pointers, top.pointers); }, {"embed_param.num_output"});
  for (float bad : {3.f, -1.f, 3.5f, std::nanf("")}) {
    Fixture fixture("num_output: 2 input_dim: 3", {0, bad}, {2});
    test::ExpectErrorContaining([&] { fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers); },
                                {"layer 'e' (Embed)", "at position 1", "[0, 3)"});
  }
}

}  // namespace
}  // namespace crema
