#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.hpp"

namespace crema {
namespace {

// y = base^(shift + scale x), in double; base -1 is e.
double ReferenceExp(double x, double base, double scale, double shift) {
  const double b = base == -1 ? std::exp(1.0) : base;
  return std::pow(b, shift + scale * x);
}

struct ExpCase {
  const char* text;
  double base, scale, shift;
};
const ExpCase kCases[] = {
    {"name: 'exp' type: 'Exp'", -1, 1, 0},
    {"name: 'exp' type: 'Exp' exp_param { scale: 0.5 shift: 0.7 }", -1, 0.5, 0.7},
    {"name: 'exp' type: 'Exp' exp_param { base: 2 scale: -0.8 shift: 1.2 }", 2, -0.8, 1.2},
    {"name: 'exp' type: 'Exp' exp_param { base: 0.5 }", 0.5, 1, 0},
};

TEST(ExpLayerTest, ForwardMatchesReference) {
  for (const ExpCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectForwardMatches(
        c.text, [&c](double x) { return ReferenceExp(x, c.base, c.scale, c.shift); }, test::Tolerance{2e-6, 2e-6});
  }
}

TEST(ExpLayerTest, Gradient) {
  for (const ExpCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::CheckLayerGradient(c.text);
  }
}

TEST(ExpLayerTest, InPlaceMatchesOutOfPlace) {
  for (const ExpCase& c : kCases) {
    SCOPED_TRACE(c.text);
    test::ExpectInPlaceMatchesOutOfPlace(c.text);
  }
}

TEST(ExpLayerTest, RejectsNonPositiveBase) {
  for (const char* base : {"0", "-2"}) {
    test::ExpectSetUpError(std::string("name: 'odd' type: 'Exp' exp_param { base: ") + base + " }",
                           {"'odd'", "exp_param.base"});
  }
}

}  // namespace
}  // namespace crema
