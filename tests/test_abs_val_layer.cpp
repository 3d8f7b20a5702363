#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "layers/abs_val.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kAbsVal[] = "name: 'abs' type: 'AbsVal'";

TEST(AbsValLayerTest, ForwardMatchesReference) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  AbsValLayer layer(test::ParseLayer(kAbsVal));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_EQ(y[i], std::fabs(x[i])) << i;
}

TEST(AbsValLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  AbsValLayer layer(test::ParseLayer(kAbsVal));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(AbsValLayerTest, GradientIsTheSignAndZeroAtZero) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({3});
  x->mutable_cpu_data()[0] = -2.f;
  x->mutable_cpu_data()[1] = 0.f;
  x->mutable_cpu_data()[2] = 3.f;
  top.Add({});
  AbsValLayer layer(test::ParseLayer(kAbsVal));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  top.pointers[0]->set_diff(5.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  EXPECT_EQ(x->cpu_diff()[0], -5.f);
  EXPECT_EQ(x->cpu_diff()[1], 0.f);
  EXPECT_EQ(x->cpu_diff()[2], 5.f);
}

TEST(AbsValLayerTest, RejectsInPlace) {
  Blob shared({4});
  std::vector<Blob*> both{&shared};
  AbsValLayer layer(test::ParseLayer(kAbsVal));
  EXPECT_FALSE(layer.AllowsInPlace());
  test::ExpectErrorContaining([&] { layer.SetUp(both, both); }, {"'abs'", "AbsVal", "in place"});
}

}  // namespace
}  // namespace crema
