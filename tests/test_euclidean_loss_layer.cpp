#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/loss/euclidean_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// 1/(2N) sum (a - b)^2 in double, N the first axis of a.
double ReferenceLoss(const Blob& a, const Blob& b) {
  double sum = 0;
  for (int i = 0; i < a.count(); ++i) {
    const double d = double(a.cpu_data()[i]) - double(b.cpu_data()[i]);
    sum += d * d;
  }
  return sum / a.shape(0) / 2.0;
}

class EuclideanLossLayerTest : public ::testing::Test {
 protected:
  EuclideanLossLayerTest() {
    test::FillGaussian(bottom.Add({4, 3, 2}), 0.f, 1.f, 11);
    test::FillGaussian(bottom.Add({4, 3, 2}), 0.5f, 1.f, 12);
    top.Add({});
  }
  test::BlobList bottom, top;
};

TEST_F(EuclideanLossLayerTest, ForwardMatchesReference) {
  EuclideanLossLayer layer(test::ParseLayer("name: 'loss' type: 'EuclideanLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->num_axes(), 0);
  EXPECT_EQ(layer.loss(0), 1.f);
  const float returned = layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*bottom.pointers[0], *bottom.pointers[1]);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
}

TEST_F(EuclideanLossLayerTest, BottomsOfOtherShapeButSameCountPerItem) {
  bottom.pointers[1]->Reshape({4, 6});
  test::FillGaussian(bottom.pointers[1], 0.f, 1.f, 13);
  EuclideanLossLayer layer(test::ParseLayer("name: 'loss' type: 'EuclideanLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*bottom.pointers[0], *bottom.pointers[1]);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
}

TEST_F(EuclideanLossLayerTest, LossWeightScalesLossAndGradient) {
  EuclideanLossLayer plain(test::ParseLayer("name: 'loss' type: 'EuclideanLoss'"));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, true}, bottom.pointers);
  const std::vector<float> da1 = test::DiffOf(*bottom.pointers[0]), db1 = test::DiffOf(*bottom.pointers[1]);

  EuclideanLossLayer weighted(test::ParseLayer("name: 'loss' type: 'EuclideanLoss' loss_weight: 3"));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss3 = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, true}, bottom.pointers);
  EXPECT_NEAR(loss3, 3.f * loss1, 1e-5 * loss3);
  const std::vector<float> da3 = test::DiffOf(*bottom.pointers[0]), db3 = test::DiffOf(*bottom.pointers[1]);
  for (size_t i = 0; i < da1.size(); ++i) {
    EXPECT_NEAR(da3[i], 3.f * da1[i], 1e-6);
    EXPECT_NEAR(db3[i], 3.f * db1[i], 1e-6);
    // Opposite signs, and (a - b) / N for a.
    EXPECT_FLOAT_EQ(db1[i], -da1[i]);
    const double d = double(bottom.pointers[0]->cpu_data()[i]) - bottom.pointers[1]->cpu_data()[i];
    EXPECT_NEAR(da1[i], d / 4, 1e-6);
  }
}

TEST_F(EuclideanLossLayerTest, GradientToBothBottoms) {
  EuclideanLossLayer layer(test::ParseLayer("name: 'loss' type: 'EuclideanLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_TRUE(layer.AllowForceBackward(1));
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST_F(EuclideanLossLayerTest, RejectsMismatchedShapes) {
  bottom.pointers[1]->Reshape({4, 5});
  EuclideanLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'EuclideanLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "EuclideanLoss", "4 3 2 (24)", "4 5 (20)"});
  bottom.pointers[1]->Reshape({2, 12});
  EuclideanLossLayer other(test::ParseLayer("name: 'my_loss' type: 'EuclideanLoss'"));
  test::ExpectErrorContaining([&] { other.SetUp(bottom.pointers, top.pointers); }, {"first axis", "2 12 (24)"});
}

}  // namespace
}  // namespace crema
