#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

// x * slope with the slope as the layer stores it (a float).
double ReferenceReLU(double x, float slope) { return x > 0 ? x : static_cast<double>(slope) * x; }

const test::GradientChecker kKinkChecker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.01f);

TEST(ReLULayerTest, ForwardZeroesNegatives) {
  test::ExpectForwardMatches("name: 'relu' type: 'ReLU'", [](double x) { return ReferenceReLU(x, 0.f); });
}

TEST(ReLULayerTest, ForwardLeakyScalesNegatives) {
  // The layer rounds slope * x to float: a few units in the last place of the exact product.
  test::ExpectForwardMatches(
      "name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }", [](double x) { return ReferenceReLU(x, 0.1f); },
      test::Tolerance{0, /*relative=*/4 * std::numeric_limits<float>::epsilon()});
}

TEST(ReLULayerTest, Gradient) {
  test::CheckLayerGradient("name: 'relu' type: 'ReLU'", test::Gaussian(), kKinkChecker, {2, 3, 4, 5});
}

TEST(ReLULayerTest, GradientLeaky) {
  test::CheckLayerGradient("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.25 }", test::Gaussian(),
                           kKinkChecker, {2, 3, 4, 5});
}

TEST(ReLULayerTest, InPlaceMatchesOutOfPlace) {
  for (const char* slope : {"0", "0.2"}) {
    SCOPED_TRACE(std::string("slope ") + slope);
    test::ExpectInPlaceMatchesOutOfPlace(std::string("name: 'relu' type: 'ReLU' relu_param { negative_slope: ") +
                                         slope + " }");
  }
}

TEST(ReLULayerTest, BackwardPassesGradientWhereInputIsPositive) {
  std::vector<float> x(10);
  for (int i = 0; i < 10; ++i) x[i] = i - 4.5f;
  const std::vector<float> dx =
      test::RunOnValues(test::MakeLayer("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.5 }").get(), x, 2.f)
          .dx;
  ASSERT_EQ(dx.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(dx[i], i < 5 ? 1.f : 2.f) << i;
}

TEST(ReLULayerTest, RejectsNegativeSlopeInPlace) {
  test::ExpectSetUpError("name: 'odd' type: 'ReLU' relu_param { negative_slope: -1 }", {"negative_slope", "'odd'"},
                         /*in_place=*/true);
}

TEST(ReLULayerTest, RejectsWrongArity) {
  test::BlobList bottom, top;
  bottom.Add({2});
  bottom.Add({2});
  top.Add({});
  EXPECT_THROW(test::MakeLayer("name: 'relu' type: 'ReLU'")->SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
