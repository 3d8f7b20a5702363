#include <gtest/gtest.h>

#include <cmath>

#include "test_util.hpp"

namespace crema {
namespace {

const char kBNLL[] = "name: 'bnll' type: 'BNLL'";

// log(1 + e^x) in double; accurate for the moderate inputs it is used with.
double ReferenceSoftplus(double x) { return std::log1p(std::exp(x)); }

TEST(BNLLLayerTest, ForwardMatchesReference) {
  test::ExpectForwardMatches(kBNLL, ReferenceSoftplus, test::Tolerance{1e-6, 1e-6}, test::Gaussian(4.f));
}

// Large inputs must not overflow (log(1 + e^100) = 100), very negative ones must not round to 0 too early.
TEST(BNLLLayerTest, NumericallyStableAtTheExtremes) {
  const test::ElementRun run = test::RunOnValues(test::MakeLayer(kBNLL).get(), {100.f, -30.f, 1000.f}, 1.f);
  EXPECT_FLOAT_EQ(run.y[0], 100.f);
  EXPECT_NEAR(run.y[1], std::exp(-30.0), 1e-6 * std::exp(-30.0));
  EXPECT_FLOAT_EQ(run.y[2], 1000.f);
  EXPECT_FLOAT_EQ(run.dx[0], 1.f);
  EXPECT_NEAR(run.dx[1], std::exp(-30.0), 1e-5 * std::exp(-30.0));
  EXPECT_FLOAT_EQ(run.dx[2], 1.f);
}

TEST(BNLLLayerTest, Gradient) { test::CheckLayerGradient(kBNLL, test::Gaussian(2.f)); }

TEST(BNLLLayerTest, InPlaceMatchesOutOfPlace) { test::ExpectInPlaceMatchesOutOfPlace(kBNLL, test::Gaussian(2.f)); }

}  // namespace
}  // namespace crema
