#include <gtest/gtest.h>

#include <vector>

#include "layers/embed.hpp"
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
    for (size_t i = 0; i < layer->blobs().size(); ++i) test::FillGaussian(layer->blobs()[i].get(), 0.f, 1.f, 3 + i);
  }
};

TEST(EmbedLayerTest, EachIndexSelectsARowPlusTheBias) {
  Fixture fixture("num_output: 3 input_dim: 5", {4, 0, 2, 2, 1, 4}, {3, 2});
  EXPECT_EQ(fixture.layer->blobs()[0]->shape(), (std::vector<int>{5, 3}));
  EXPECT_EQ(fixture.layer->blobs()[1]->shape(), (std::vector<int>{3}));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{3, 2, 3}));
  const float* weights = fixture.layer->blobs()[0]->cpu_data();
  const float* bias = fixture.layer->blobs()[1]->cpu_data();
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

TEST(EmbedLayerTest, BadParametersAndIndicesAreNamed) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  EmbedLayer no_dim(test::ParseLayer("name: 'e' type: 'Embed' embed_param { num_output: 2 }"));
  test::ExpectErrorContaining([&] { no_dim.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'e' (Embed)", "embed_param.input_dim"});
  EmbedLayer no_output(test::ParseLayer("name: 'e' type: 'Embed' embed_param { input_dim: 2 }"));
  test::ExpectErrorContaining([&] { no_output.SetUp(bottom.pointers, top.pointers); }, {"embed_param.num_output"});
  for (float bad : {3.f, -1.f, 1.5f}) {
    Fixture fixture("num_output: 2 input_dim: 3", {0, bad}, {2});
    test::ExpectErrorContaining([&] { fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers); },
                                {"layer 'e' (Embed)", "at position 1", "[0, 3)"});
  }
}

}  // namespace
}  // namespace crema
