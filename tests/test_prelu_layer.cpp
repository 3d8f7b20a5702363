#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

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

// A PReLU layer set up on a Gaussian bottom of `shape`, with its slopes as its filler drew them.
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<Layer> layer;
  std::vector<float> slopes;

  Fixture(const std::string& text, const std::vector<int>& shape) : layer(test::MakeLayer(text, shape)) {
    test::FillGaussian(bottom.Add(shape));
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    slopes = test::DataOf(*layer->params()[0]);
  }
  // Runs forward and expects every top element to be ReferencePReLU of its bottom element.
  void ExpectForwardMatchesReference(int channels, int inner) {
    layer->Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      EXPECT_EQ(y[i], ReferencePReLU(x[i], slopes, i, channels, inner)) << layer->name() << " at " << i;
    }
  }
};

TEST(PReLULayerTest, DefaultSlopesAreAQuarterPerChannel) {
  auto layer = test::MakeLayer("name: 'prelu' type: 'PReLU'");
  test::ExpectForwardMatches(layer.get(), [](double x) { return x > 0 ? x : 0.25 * x; });
  ASSERT_EQ(layer->params().size(), 1u);
  EXPECT_EQ(layer->params()[0]->shape(), std::vector<int>{3});
  for (float a : test::DataOf(*layer->params()[0])) EXPECT_EQ(a, 0.25f);
}

TEST(PReLULayerTest, ForwardUsesEachChannelsSlope) {
  for (const char* text : {kPReLU, kSharedPReLU}) {
    SCOPED_TRACE(text);
    Fixture fixture(text, {2, 3, 4, 5});
    const bool shared = text == kSharedPReLU;
    EXPECT_EQ(fixture.layer->params()[0]->shape(), std::vector<int>{shared ? 1 : 3});
    fixture.ExpectForwardMatchesReference(3, 20);
  }
}

TEST(PReLULayerTest, TwoAxisBottom) { Fixture(kPReLU, {4, 3}).ExpectForwardMatchesReference(3, 1); }

// The bottom's and the slopes' gradients.
TEST(PReLULayerTest, Gradient) {
  for (const char* text : {kPReLU, kSharedPReLU}) {
    SCOPED_TRACE(text);
    test::CheckLayerGradient(text, test::Gaussian(),
                             test::GradientChecker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f),
                             {2, 3, 2, 3});
  }
}

TEST(PReLULayerTest, SlopeGradientMatchesReferenceAndAccumulates) {
  Fixture fixture(kPReLU, {2, 3, 4});
  Layer& layer = *fixture.layer;
  layer.Forward(fixture.bottom.pointers, fixture.top.pointers);
  Blob* y = fixture.top.pointers[0];
  test::FillGaussian(y, 0.f, 1.f, 7);
  std::copy(y->cpu_data(), y->cpu_data() + y->count(), y->mutable_cpu_diff());
  layer.params()[0]->set_diff(1.f);
  layer.Backward(fixture.top.pointers, {false}, fixture.bottom.pointers);
  std::vector<double> expected(3, 1.0);
  const float* x = fixture.bottom.pointers[0]->cpu_data();
  for (int i = 0; i < 24; ++i) {
    if (x[i] <= 0) expected[(i / 4) % 3] += y->cpu_diff()[i] * x[i];
  }
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(layer.params()[0]->cpu_diff()[c], expected[c], 1e-5) << c;
}

// In place, the input is kept in an internal blob for the backward pass.
TEST(PReLULayerTest, InPlaceMatchesOutOfPlace) {
  auto separate = test::MakeLayer(kPReLU), in_place = test::MakeLayer(kPReLU);
  test::ExpectInPlaceMatchesOutOfPlace(separate.get(), in_place.get(), test::Gaussian(), {2, 3, 4});
  EXPECT_EQ(in_place->internal_blob_names(), std::vector<std::string>{"prelu.input"});
}

TEST(PReLULayerTest, RejectsOneAxisBottom) {
  test::ExpectSetUpError("name: 'odd' type: 'PReLU'", {"'odd'", "PReLU", "2 axes"}, false, {5});
}

TEST(PReLULayerTest, RejectsAChangeOfChannels) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 4});
  top.Add({});
  auto layer = test::MakeLayer("name: 'odd' type: 'PReLU'");
  layer->SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({2, 5, 4});
  test::ExpectErrorContaining([&] { layer->Reshape(bottom.pointers, top.pointers); },
                              {"'odd'", "5 channels", "3 slopes"});
}

TEST(PReLULayerTest, StoredSlopesMustMatchTheChannels) {
  LayerParameter param = test::ParseLayer("name: 'odd' type: 'PReLU'");
  BlobProto* stored = param.add_blobs();
  stored->mutable_shape()->add_dim(4);
  for (int i = 0; i < 4; ++i) stored->add_data(0.1f);
  test::ExpectSetUpError(param, {"'odd'", "slopes"}, false, {2, 3, 4});
}

}  // namespace
}  // namespace crema
