#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

const char kTanH[] = "name: 'tanh' type: 'TanH'";

TEST(TanHLayerTest, ForwardMatchesReference) {
  test::ExpectForwardMatches(
      kTanH, [](double x) { return std::tanh(x); }, test::Tolerance{1e-6}, test::Gaussian(3.f));
}

TEST(TanHLayerTest, SaturatesWithoutNaN) {
  EXPECT_EQ(test::RunOnValues(test::MakeLayer(kTanH).get(), {-200.f, 200.f}).y, (std::vector<float>{-1.f, 1.f}));
}

TEST(TanHLayerTest, Gradient) { test::CheckLayerGradient(kTanH); }

TEST(TanHLayerTest, InPlaceMatchesOutOfPlace) { test::ExpectInPlaceMatchesOutOfPlace(kTanH); }

TEST(TanHLayerTest, RejectsWrongArity) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  top.Add({});
  EXPECT_THROW(test::MakeLayer(kTanH)->SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
