#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.hpp"

namespace crema {
namespace {

double ReferenceELU(double x, double alpha) { return x > 0 ? x : alpha * (std::exp(x) - 1); }

void ExpectForwardMatches(const std::string& text, double alpha) {
  test::ExpectForwardMatches(
      text, [alpha](double x) { return ReferenceELU(x, alpha); }, test::Tolerance{1e-5}, test::Gaussian(2.f));
}

TEST(ELULayerTest, ForwardDefaultAlphaIsOne) { ExpectForwardMatches("name: 'elu' type: 'ELU'", 1.0); }

TEST(ELULayerTest, ForwardWithAlpha) {
  ExpectForwardMatches("name: 'elu' type: 'ELU' elu_param { alpha: 0.5 }", 0.5);
  ExpectForwardMatches("name: 'elu' type: 'ELU' elu_param { alpha: -0.7 }", -0.7);
}

TEST(ELULayerTest, Gradient) {
  for (const char* text : {"name: 'elu' type: 'ELU'", "name: 'elu' type: 'ELU' elu_param { alpha: 0.5 }",
                           "name: 'elu' type: 'ELU' elu_param { alpha: -0.7 }"}) {
    test::CheckLayerGradient(text, test::Gaussian(),
                             test::GradientChecker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f));
  }
}

TEST(ELULayerTest, InPlaceMatchesOutOfPlace) {
  for (const char* text : {"name: 'elu' type: 'ELU'", "name: 'elu' type: 'ELU' elu_param { alpha: 0.3 }",
                           "name: 'elu' type: 'ELU' elu_param { alpha: 0 }"}) {
    test::ExpectInPlaceMatchesOutOfPlace(text);
  }
}

TEST(ELULayerTest, RejectsNegativeAlphaInPlace) {
  test::ExpectSetUpError("name: 'odd' type: 'ELU' elu_param { alpha: -1 }", {"'odd'", "elu_param.alpha", "in place"},
                         /*in_place=*/true);
}

TEST(ELULayerTest, RejectsNonFiniteAlpha) {
  test::ExpectSetUpError("name: 'odd' type: 'ELU' elu_param { alpha: inf }", {"'odd'", "elu_param.alpha"});
}

}  // namespace
}  // namespace crema
