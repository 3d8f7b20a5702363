#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/clip.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Runs the layer out of place and in place on the same input and top gradient: the outputs and the bottom
// gradients must be the same.
template <typename LayerType>
void ExpectInPlaceMatchesOutOfPlace(const LayerParameter& param, const std::function<void(Blob*)>& fill) {
  const std::vector<int> shape{3, 4, 5};
  Blob top_diff(shape);
  test::FillGaussian(&top_diff, 0.f, 1.f, 99);

  test::BlobList bottom, top;
  fill(bottom.Add(shape));
  top.Add({});
  LayerType separate(param);
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  fill(&shared);
  std::vector<Blob*> both{&shared};
  LayerType in_place(param);
  in_place.SetUp(both, both);
  in_place.Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]) << i;
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  in_place.Backward(both, {true}, both);
  for (int i = 0; i < shared.count(); ++i) {
    EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]) << i;
  }
}

const char kClip[] = "name: 'clip' type: 'Clip' clip_param { min: -0.5 max: 0.8 }";

// Gaussian values moved off the kinks at -0.5 and 0.8, so that the numeric gradient is well defined.
void FillAwayFromKinks(Blob* blob) {
  test::FillGaussian(blob);
  float* x = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) {
    for (float kink : {-0.5f, 0.8f}) {
      if (std::fabs(x[i] - kink) < 0.03f) x[i] = kink + (x[i] < kink ? -0.05f : 0.05f);
    }
  }
}

TEST(ClipLayerTest, ForwardMatchesReference) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ClipLayer layer(test::ParseLayer(kClip));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  int low = 0, high = 0;
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
    EXPECT_EQ(y[i], std::min(std::max(x[i], -0.5f), 0.8f)) << i;
    low += x[i] < -0.5f;
    high += x[i] > 0.8f;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
}

TEST(ClipLayerTest, Gradient) {
  test::BlobList bottom, top;
  FillAwayFromKinks(bottom.Add({2, 3, 4}));
  top.Add({});
  ClipLayer layer(test::ParseLayer(kClip));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

// The gradient passes on [min, max], both ends included.
TEST(ClipLayerTest, GradientPassesOnTheClosedInterval) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({4});
  const float values[] = {-0.6f, -0.5f, 0.8f, 0.9f};
  std::copy(values, values + 4, x->mutable_cpu_data());
  top.Add({});
  ClipLayer layer(test::ParseLayer(kClip));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  top.pointers[0]->set_diff(3.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  EXPECT_EQ(test::DiffOf(*x), (std::vector<float>{0.f, 3.f, 3.f, 0.f}));
}

TEST(ClipLayerTest, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace<ClipLayer>(test::ParseLayer(kClip), [](Blob* b) { test::FillGaussian(b); });
}

TEST(ClipLayerTest, RejectsMissingOrCrossedBounds) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"clip_param { max: 1 }", "clip_param.min"},
      {"clip_param { min: 1 }", "clip_param.max"},
      {"", "clip_param.min"},
      {"clip_param { min: 2 max: 1 }", "clip_param.min"},
      {"clip_param { min: nan max: 1 }", "clip_param.min"},
  };
  for (const auto& c : cases) {
    test::BlobList bottom, top;
    bottom.Add({4});
    top.Add({});
    ClipLayer layer(test::ParseLayer("name: 'odd' type: 'Clip' " + c.first));
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", c.second});
  }
}

TEST(ClipLayerTest, EqualBoundsAreAllowed) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({5}));
  top.Add({});
  ClipLayer layer(test::ParseLayer("name: 'clip' type: 'Clip' clip_param { min: 0.25 max: 0.25 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  for (float y : test::DataOf(*top.pointers[0])) EXPECT_EQ(y, 0.25f);
}

}  // namespace
}  // namespace crema
