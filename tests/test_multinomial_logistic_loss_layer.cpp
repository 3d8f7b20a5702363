#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/loss/multinomial_logistic_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// -1/N sum_n log(max(p[n, label_n], 1e-20)) in double.
double ReferenceLoss(const Blob& prob, const Blob& labels) {
  const int num = prob.shape(0), classes = prob.count(1);
  double sum = 0;
  for (int n = 0; n < num; ++n) {
    const double p = prob.cpu_data()[n * classes + int(labels.cpu_data()[n])];
    sum -= std::log(std::max(p, 1e-20));
  }
  return sum / num;
}

class MultinomialLogisticLossLayerTest : public ::testing::Test {
 protected:
  MultinomialLogisticLossLayerTest() {
    // Probabilities of 3 items over 2 x 2 classes, each row normalised, none near 0.
    Blob* prob = bottom.Add({3, 2, 2});
    test::FillUniform(prob, 0.3f, 1.f, 41);
    for (int n = 0; n < 3; ++n) {
      float* row = prob->mutable_cpu_data() + n * 4;
      double sum = 0;
      for (int c = 0; c < 4; ++c) sum += row[c];
      for (int c = 0; c < 4; ++c) row[c] = float(row[c] / sum);
    }
    Blob* labels = bottom.Add({3, 1});
    labels->mutable_cpu_data()[0] = 2.f;
    labels->mutable_cpu_data()[1] = 0.f;
    labels->mutable_cpu_data()[2] = 3.f;
    top.Add({});
  }
  Blob* prob() { return bottom.pointers[0]; }
  Blob* labels() { return bottom.pointers[1]; }
  test::BlobList bottom, top;
};

TEST_F(MultinomialLogisticLossLayerTest, ForwardMatchesReference) {
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'loss' type: 'MultinomialLogisticLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->num_axes(), 0);
  EXPECT_EQ(layer.loss(0), 1.f);
  const float returned = layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*prob(), *labels());
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-6 * expected);
  EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
}

TEST_F(MultinomialLogisticLossLayerTest, ZeroProbabilityIsClampedAt1e20) {
  prob()->mutable_cpu_data()[2] = 0.f;  // item 0's label
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'loss' type: 'MultinomialLogisticLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*prob(), *labels());
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  EXPECT_GT(expected, -std::log(1e-20) / 3);
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(prob()->cpu_diff()[2], -1.0 / (3 * 1e-20), 1e-5 / (3 * 1e-20));
}

TEST_F(MultinomialLogisticLossLayerTest, LossWeightScalesLossAndGradient) {
  MultinomialLogisticLossLayer plain(test::ParseLayer("name: 'loss' type: 'MultinomialLogisticLoss'"));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, false}, bottom.pointers);
  const std::vector<float> dx1 = test::DiffOf(*prob());
  MultinomialLogisticLossLayer weighted(
      test::ParseLayer("name: 'loss' type: 'MultinomialLogisticLoss' loss_weight: 4"));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss4 = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(loss4, 4.f * loss1, 1e-6 * loss4);
  const std::vector<float> dx4 = test::DiffOf(*prob());
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < 4; ++c) {
      const int i = n * 4 + c;
      EXPECT_NEAR(dx4[i], 4.f * dx1[i], 1e-6);
      const double want = c == int(labels()->cpu_data()[n]) ? -1.0 / (3.0 * prob()->cpu_data()[i]) : 0.0;
      EXPECT_NEAR(dx1[i], want, 1e-6);
    }
  }
}

TEST_F(MultinomialLogisticLossLayerTest, Gradient) {
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'loss' type: 'MultinomialLogisticLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-3f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
}

TEST_F(MultinomialLogisticLossLayerTest, RejectsBadLabels) {
  labels()->mutable_cpu_data()[1] = 4.f;
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'MultinomialLogisticLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); },
                              {"'my_loss'", "label 4", "index 1", "[0, 4)"});
}

TEST_F(MultinomialLogisticLossLayerTest, RejectsLabelCountMismatch) {
  labels()->Reshape({3, 2});
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'MultinomialLogisticLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "3 2 (6)", "3 2 2 (12)"});
}

TEST_F(MultinomialLogisticLossLayerTest, RefusesGradientToLabels) {
  MultinomialLogisticLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'MultinomialLogisticLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(bottom.pointers, top.pointers);
  test::ExpectErrorContaining(
      [&] {
        layer.Backward(top.pointers, {true, true}, bottom.pointers);
      },
      {"'my_loss'", "labels"});
}

}  // namespace
}  // namespace crema
