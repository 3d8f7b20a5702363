#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

const char kSigmoid[] = "name: 'sig' type: 'Sigmoid'";

TEST(SigmoidLayerTest, ForwardMatchesReference) {
  test::ExpectForwardMatches(
      kSigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, test::Tolerance{1e-6}, test::Gaussian(3.f));
}

TEST(SigmoidLayerTest, SaturatesWithoutNaN) {
  EXPECT_EQ(test::RunOnValues(test::MakeLayer(kSigmoid).get(), {-200.f, 200.f}).y, (std::vector<float>{0.f, 1.f}));
}

TEST(SigmoidLayerTest, Gradient) { test::CheckLayerGradient(kSigmoid); }

TEST(SigmoidLayerTest, InPlaceMatchesOutOfPlace) { test::ExpectInPlaceMatchesOutOfPlace(kSigmoid); }

TEST(SigmoidLayerTest, RejectsWrongArity) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  top.Add({});
  EXPECT_THROW(test::MakeLayer(kSigmoid)->SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
