#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

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
  int low = 0, high = 0;
  test::ExpectForwardMatches(kClip, [&](double x) {
    low += x < -0.5f;
    high += x > 0.8f;
    return std::min(std::max(x, -0.5), static_cast<double>(0.8f));  // the bounds as the layer stores them
  });
  // The input reaches beyond both bounds.
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
}

TEST(ClipLayerTest, Gradient) { test::CheckLayerGradient(kClip, FillAwayFromKinks); }

// The gradient passes on [min, max], both ends included.
TEST(ClipLayerTest, GradientPassesOnTheClosedInterval) {
  EXPECT_EQ(test::RunOnValues(test::MakeLayer(kClip).get(), {-0.6f, -0.5f, 0.8f, 0.9f}, 3.f).dx,
            (std::vector<float>{0.f, 3.f, 3.f, 0.f}));
}

TEST(ClipLayerTest, InPlaceMatchesOutOfPlace) { test::ExpectInPlaceMatchesOutOfPlace(kClip); }

TEST(ClipLayerTest, RejectsMissingOrCrossedBounds) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"clip_param { max: 1 }", "clip_param.min"},
      {"clip_param { min: 1 }", "clip_param.max"},
      {"", "clip_param.min"},
      {"clip_param { min: 2 max: 1 }", "clip_param.min"},
      {"clip_param { min: nan max: 1 }", "clip_param.min"},
  };
  for (const auto& c : cases) test::ExpectSetUpError("name: 'odd' type: 'Clip' " + c.first, {"'odd'", c.second});
}

TEST(ClipLayerTest, EqualBoundsAreAllowed) {
  test::ExpectForwardMatches("name: 'clip' type: 'Clip' clip_param { min: 0.25 max: 0.25 }",
                             [](double) { return 0.25; }, {}, test::Gaussian(), {5});
}

}  // namespace
}  // namespace crema
