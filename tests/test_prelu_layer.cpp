#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/prelu.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kPReLU[] = "name: 'prelu' type: 'PReLU' prelu_param { filler { type: 'gaussian' std: 0.5 } }";
const char kSharedPReLU[] =
    "name: 'prelu' type: 'PReLU' prelu_param { channel_shared: true filler { type: 'uniform' min: 0.1 max: 0.9 } }";

// y at flat index i of an (n, c, inner) input, with one slope per channel or one for all.
float ReferencePReLU(float x, const std::vector<float>& slopes, int i, int channels, int inner) {
  const float a = slopes.size() == 1 ? slopes[0] : slopes[(i / inner) % channels];
  return x > 0 ? x : a * x;
}

TEST(PReLULayerTest, DefaultSlopesAreAQuarterPerChannel) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  PReLULayer layer(test::ParseLayer("name: 'prelu' type: 'PReLU'"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.blobs().size(), 1u);
  EXPECT_EQ(layer.blobs()[0]->shape(), std::vector<int>{3});
  for (float a : test::DataOf(*layer.blobs()[0])) EXPECT_EQ(a, 0.25f);
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.25f * x[i]) << i;
}

TEST(PReLULayerTest, ForwardUsesEachChannelsSlope) {
  for (const char* text : {kPReLU, kSharedPReLU}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4, 5}));
    top.Add({});
    PReLULayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    const bool shared = text == kSharedPReLU;
    EXPECT_EQ(layer.blobs()[0]->shape(), std::vector<int>{shared ? 1 : 3});
    const std::vector<float> slopes = test::DataOf(*layer.blobs()[0]);
    layer.Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      EXPECT_EQ(y[i], ReferencePReLU(x[i], slopes, i, 3, 20)) << text << " at " << i;
    }
  }
}

TEST(PReLULayerTest, TwoAxisBottom) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({4, 3}));
  top.Add({});
  PReLULayer layer(test::ParseLayer(kPReLU));
  layer.SetUp(bottom.pointers, top.pointers);
  const std::vector<float> slopes = test::DataOf(*layer.blobs()[0]);
  layer.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(top.pointers[0]->cpu_data()[i], ReferencePReLU(bottom.pointers[0]->cpu_data()[i], slopes, i, 3, 1));
  }
}

// The bottom's and the slopes' gradients.
TEST(PReLULayerTest, Gradient) {
  for (const char* text : {kPReLU, kSharedPReLU}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 2, 3}));
    top.Add({});
    PReLULayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(PReLULayerTest, SlopeGradientMatchesReferenceAndAccumulates) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  PReLULayer layer(test::ParseLayer(kPReLU));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  Blob* y = top.pointers[0];
  test::FillGaussian(y, 0.f, 1.f, 7);
  std::copy(y->cpu_data(), y->cpu_data() + y->count(), y->mutable_cpu_diff());
  layer.blobs()[0]->set_diff(1.f);
  layer.Backward(top.pointers, {false}, bottom.pointers);
  std::vector<double> expected(3, 1.0);
  const float* x = bottom.pointers[0]->cpu_data();
  for (int i = 0; i < 24; ++i) {
    if (x[i] <= 0) expected[(i / 4) % 3] += y->cpu_diff()[i] * x[i];
  }
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[c], expected[c], 1e-5) << c;
}

// In place, the input is kept in an internal blob for the backward pass.
TEST(PReLULayerTest, InPlaceMatchesOutOfPlace) {
  const LayerParameter param = test::ParseLayer(kPReLU);
  const std::vector<int> shape{2, 3, 4};
  Blob top_diff(shape);
  test::FillGaussian(&top_diff, 0.f, 1.f, 99);

  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape));
  top.Add({});
  PReLULayer separate(param);
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  separate.blobs()[0]->set_diff(0.f);
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  test::FillGaussian(&shared);
  std::vector<Blob*> both{&shared};
  PReLULayer in_place(param);
  in_place.SetUp(both, both);
  ASSERT_EQ(in_place.internal_blob_names(), std::vector<std::string>{"prelu.input"});
  EXPECT_EQ(test::DataOf(*in_place.blobs()[0]), test::DataOf(*separate.blobs()[0]));
  in_place.Forward(both, both);
  EXPECT_EQ(test::DataOf(shared), test::DataOf(*top.pointers[0]));
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  in_place.blobs()[0]->set_diff(0.f);
  in_place.Backward(both, {true}, both);
  EXPECT_EQ(test::DiffOf(shared), test::DiffOf(*bottom.pointers[0]));
  EXPECT_EQ(test::DiffOf(*in_place.blobs()[0]), test::DiffOf(*separate.blobs()[0]));
}

TEST(PReLULayerTest, RejectsOneAxisBottom) {
  test::BlobList bottom, top;
  bottom.Add({5});
  top.Add({});
  PReLULayer layer(test::ParseLayer("name: 'odd' type: 'PReLU'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "PReLU", "2 axes"});
}

TEST(PReLULayerTest, RejectsAChangeOfChannels) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  PReLULayer layer(test::ParseLayer("name: 'odd' type: 'PReLU'"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({2, 5, 4});
  test::ExpectErrorContaining([&] { layer.Reshape(bottom.pointers, top.pointers); },
                              {"'odd'", "5 channels", "3 slopes"});
}

TEST(PReLULayerTest, StoredSlopesMustMatchTheChannels) {
  LayerParameter param = test::ParseLayer("name: 'odd' type: 'PReLU'");
  BlobProto* stored = param.add_blobs();
  stored->mutable_shape()->add_dim(4);
  for (int i = 0; i < 4; ++i) stored->add_data(0.1f);
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  PReLULayer layer(param);
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "slopes"});
}

}  // namespace
}  // namespace crema
