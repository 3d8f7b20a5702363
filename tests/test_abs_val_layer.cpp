#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

const char kAbsVal[] = "name: 'abs' type: 'AbsVal'";

TEST(AbsValLayerTest, ForwardMatchesReference) {
  test::ExpectForwardMatches(kAbsVal, [](double x) { return std::fabs(x); });
}

TEST(AbsValLayerTest, Gradient) {
  test::CheckLayerGradient(kAbsVal, test::Gaussian(),
                           test::GradientChecker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f));
}

TEST(AbsValLayerTest, GradientIsTheSignAndZeroAtZero) {
  EXPECT_EQ(test::RunOnValues(test::MakeLayer(kAbsVal).get(), {-2.f, 0.f, 3.f}, 5.f).dx,
            (std::vector<float>{-5.f, 0.f, 5.f}));
}

TEST(AbsValLayerTest, RejectsInPlace) {
  EXPECT_FALSE(test::MakeLayer(kAbsVal)->AllowsInPlace());
  test::ExpectSetUpError(kAbsVal, {"'abs'", "AbsVal", "in place"}, /*in_place=*/true);
}

}  // namespace
}  // namespace crema
