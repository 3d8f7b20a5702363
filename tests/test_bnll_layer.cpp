#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/bnll.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kBNLL[] = "name: 'bnll' type: 'BNLL'";

// log(1 + e^x) in double; accurate for the moderate inputs it is used with.
double ReferenceSoftplus(double x) { return std::log1p(std::exp(x)); }

TEST(BNLLLayerTest, ForwardMatchesReference) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}), 0.f, 4.f);
  top.Add({});
  BNLLLayer layer(test::ParseLayer(kBNLL));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
    const double expected = ReferenceSoftplus(x[i]);
    EXPECT_NEAR(y[i], expected, 1e-6 * std::max(1.0, expected)) << x[i];
  }
}

// Large inputs must not overflow (log(1 + e^100) = 100), very negative ones must not round to 0 too early.
TEST(BNLLLayerTest, NumericallyStableAtTheExtremes) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({3});
  x->mutable_cpu_data()[0] = 100.f;
  x->mutable_cpu_data()[1] = -30.f;
  x->mutable_cpu_data()[2] = 1000.f;
  top.Add({});
  BNLLLayer layer(test::ParseLayer(kBNLL));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const float* y = top.pointers[0]->cpu_data();
  EXPECT_FLOAT_EQ(y[0], 100.f);
  EXPECT_NEAR(y[1], std::exp(-30.0), 1e-6 * std::exp(-30.0));
  EXPECT_FLOAT_EQ(y[2], 1000.f);
  top.pointers[0]->set_diff(1.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  EXPECT_FLOAT_EQ(x->cpu_diff()[0], 1.f);
  EXPECT_NEAR(x->cpu_diff()[1], std::exp(-30.0), 1e-5 * std::exp(-30.0));
  EXPECT_FLOAT_EQ(x->cpu_diff()[2], 1.f);
}

TEST(BNLLLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}), 0.f, 2.f);
  top.Add({});
  BNLLLayer layer(test::ParseLayer(kBNLL));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(BNLLLayerTest, InPlaceMatchesOutOfPlace) {
  const LayerParameter param = test::ParseLayer(kBNLL);
  const std::vector<int> shape{3, 4, 5};
  Blob top_diff(shape);
  test::FillGaussian(&top_diff, 0.f, 1.f, 99);

  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape), 0.f, 2.f);
  top.Add({});
  BNLLLayer separate(param);
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  test::FillGaussian(&shared, 0.f, 2.f);
  std::vector<Blob*> both{&shared};
  BNLLLayer in_place(param);
  in_place.SetUp(both, both);
  in_place.Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]) << i;
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  in_place.Backward(both, {true}, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]) << i;
}

}  // namespace
}  // namespace crema
