#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

struct PowerCase {
  const char* text;
  double power, scale, shift;
  bool positive_base;  // the inputs must keep shift + scale x > 0 (non-integer power)
};
const PowerCase kCases[] = {
    {"name: 'pow' type: 'Power'", 1, 1, 0, false},
    {"name: 'pow' type: 'Power' power_param { power: 0.37 scale: 0.83 shift: 0.4 }", 0.37, 0.83, 0.4, true},
    {"name: 'pow' type: 'Power' power_param { power: 2 scale: 0.5 shift: -1 }", 2, 0.5, -1, false},
    {"name: 'pow' type: 'Power' power_param { power: 3 scale: -1.5 shift: 0.2 }", 3, -1.5, 0.2, false},
    {"name: 'pow' type: 'Power' power_param { power: -1.5 scale: 1.2 shift: 0.1 }", -1.5, 1.2, 0.1, true},
    {"name: 'pow' type: 'Power' power_param { power: 0 scale: 2 }", 0, 2, 0, false},
    {"name: 'pow' type: 'Power' power_param { power: 2 scale: 0 shift: 3 }", 2, 0, 3, false},
};

test::BlobFiller Fill(const PowerCase& c) { return c.positive_base ? test::Uniform(0.5f, 2.f) : test::Gaussian(); }

TEST(PowerLayerTest, ForwardMatchesReference) {
  for (const PowerCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectForwardMatches(
        c.text, [&c](double x) { return std::pow(c.shift + c.scale * x, c.power); }, test::Tolerance{2e-6, 2e-6},
        Fill(c));
  }
}

TEST(PowerLayerTest, Gradient) {
  for (const PowerCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::CheckLayerGradient(c.text, Fill(c), test::GradientChecker(1e-2f, 2e-3f));
  }
}

// Where the base is 0 the gradient of power 2 is 0 (Caffe's division by the base gives NaN there).
TEST(PowerLayerTest, GradientAtZeroBase) {
  const test::ElementRun run = test::RunOnValues(
      test::MakeLayer("name: 'pow' type: 'Power' power_param { power: 2 scale: 0.5 shift: -1 }").get(), {2.f}, 1.f);
  EXPECT_EQ(run.y, std::vector<float>{0.f});
  EXPECT_EQ(run.dx, std::vector<float>{0.f});
}

TEST(PowerLayerTest, InPlaceMatchesOutOfPlace) {
  for (const PowerCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectInPlaceMatchesOutOfPlace(c.text, Fill(c));
  }
}

TEST(PowerLayerTest, RejectsNonFiniteParameters) {
  for (const char* field : {"power", "scale", "shift"}) {
    test::ExpectSetUpError(std::string("name: 'odd' type: 'Power' power_param { ") + field + ": nan }",
                           {"'odd'", std::string("power_param.") + field});
  }
}

}  // namespace
}  // namespace crema
