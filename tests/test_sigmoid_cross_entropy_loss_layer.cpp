#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/loss/sigmoid_cross_entropy_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// -(t log s + (1 - t) log(1 - s)), s = 1 / (1 + exp(-x)), summed in double over targets other than
// `ignore` (when has_ignore) and divided by the normalizer `mode` names.
double ReferenceLoss(const Blob& x, const Blob& t, const std::string& mode, bool has_ignore, float ignore) {
  double sum = 0;
  int valid = 0;
  for (int i = 0; i < x.count(); ++i) {
    const double target = t.cpu_data()[i];
    if (has_ignore && target == ignore) continue;
    const double s = 1.0 / (1.0 + std::exp(-double(x.cpu_data()[i])));
    sum -= target * std::log(s) + (1.0 - target) * std::log(1.0 - s);
    ++valid;
  }
  double normalizer = 1;
  if (mode == "FULL") normalizer = x.count();
  if (mode == "VALID") normalizer = valid;
  if (mode == "BATCH_SIZE") normalizer = x.shape(0);
  return sum / std::max(normalizer, 1.0);
}

class SigmoidCrossEntropyLossLayerTest : public ::testing::Test {
 protected:
  SigmoidCrossEntropyLossLayerTest() {
    test::FillGaussian(bottom.Add({3, 4, 2}), 0.f, 2.f, 21);
    test::FillUniform(bottom.Add({3, 4, 2}), 0.f, 1.f, 22);
    top.Add({});
  }
  Blob* scores() { return bottom.pointers[0]; }
  Blob* targets() { return bottom.pointers[1]; }
  // Marks every fifth target as ignored (-1).
  void IgnoreSome() {
    for (int i = 0; i < targets()->count(); i += 5) targets()->mutable_cpu_data()[i] = -1.f;
  }
  test::BlobList bottom, top;
};

TEST_F(SigmoidCrossEntropyLossLayerTest, DefaultNormalizationIsTheBatchSize) {
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer("name: 'loss' type: 'SigmoidCrossEntropyLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->num_axes(), 0);
  EXPECT_EQ(layer.loss(0), 1.f);
  const float returned = layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*scores(), *targets(), "BATCH_SIZE", false, 0);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
}

TEST_F(SigmoidCrossEntropyLossLayerTest, ForwardMatchesReferenceInEveryModeWithIgnoredTargets) {
  IgnoreSome();
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    const std::string text =
        "name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalization: ";
    SigmoidCrossEntropyLossLayer layer(test::ParseLayer(text + mode + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    const double expected = ReferenceLoss(*scores(), *targets(), mode, true, -1.f);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected) << mode;
  }
}

TEST_F(SigmoidCrossEntropyLossLayerTest, DeprecatedNormalizeChoosesValidOrBatchSize) {
  IgnoreSome();
  for (bool normalize : {true, false}) {
    const std::string text = "name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalize: ";
    SigmoidCrossEntropyLossLayer layer(test::ParseLayer(text + (normalize ? "true" : "false") + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    const double expected = ReferenceLoss(*scores(), *targets(), normalize ? "VALID" : "BATCH_SIZE", true, -1.f);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  }
}

TEST_F(SigmoidCrossEntropyLossLayerTest, StableForHugeScores) {
  scores()->mutable_cpu_data()[0] = 200.f;
  targets()->mutable_cpu_data()[0] = 0.f;
  scores()->mutable_cpu_data()[1] = -200.f;
  targets()->mutable_cpu_data()[1] = 1.f;
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer("name: 'loss' type: 'SigmoidCrossEntropyLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_TRUE(std::isfinite(top.pointers[0]->cpu_data()[0]));
  EXPECT_GT(top.pointers[0]->cpu_data()[0], 400.f / 3 - 1);
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(scores()->cpu_diff()[0], 1.f / 3, 1e-6);
  EXPECT_NEAR(scores()->cpu_diff()[1], -1.f / 3, 1e-6);
}

TEST_F(SigmoidCrossEntropyLossLayerTest, LossWeightScalesLossAndGradient) {
  SigmoidCrossEntropyLossLayer plain(test::ParseLayer("name: 'loss' type: 'SigmoidCrossEntropyLoss'"));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, false}, bottom.pointers);
  const std::vector<float> dx1 = test::DiffOf(*scores());
  SigmoidCrossEntropyLossLayer weighted(
      test::ParseLayer("name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_weight: 0.5"));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss_half = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(loss_half, 0.5f * loss1, 1e-6 * loss1);
  const std::vector<float> dx_half = test::DiffOf(*scores());
  for (size_t i = 0; i < dx1.size(); ++i) {
    EXPECT_NEAR(dx_half[i], 0.5f * dx1[i], 1e-7);
    const double s = 1.0 / (1.0 + std::exp(-double(scores()->cpu_data()[i])));
    EXPECT_NEAR(dx1[i], (s - targets()->cpu_data()[i]) / 3, 1e-6);
  }
}

TEST_F(SigmoidCrossEntropyLossLayerTest, GradientInEveryMode) {
  IgnoreSome();
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(mode);
    const std::string text =
        "name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalization: ";
    SigmoidCrossEntropyLossLayer layer(test::ParseLayer(text + mode + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
  }
}

TEST_F(SigmoidCrossEntropyLossLayerTest, EveryTargetIgnoredGivesZeroLoss) {
  targets()->set_data(-1.f);
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer(
      "name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalization: VALID }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], 0.f);
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_EQ(test::AbsSum(test::DiffOf(*scores())), 0.0);
}

TEST_F(SigmoidCrossEntropyLossLayerTest, RejectsTargetOutsideZeroOne) {
  targets()->mutable_cpu_data()[7] = 1.5f;
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SigmoidCrossEntropyLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); },
                              {"'my_loss'", "target 1.5", "index 7"});
  targets()->mutable_cpu_data()[7] = -1.f;  // not ignored without an ignore_label
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); }, {"target -1", "index 7"});
}

TEST_F(SigmoidCrossEntropyLossLayerTest, RejectsCountMismatch) {
  targets()->Reshape({3, 4});
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SigmoidCrossEntropyLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "3 4 2 (24)", "3 4 (12)"});
}

TEST_F(SigmoidCrossEntropyLossLayerTest, RefusesGradientToTargets) {
  SigmoidCrossEntropyLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SigmoidCrossEntropyLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(bottom.pointers, top.pointers);
  test::ExpectErrorContaining(
      [&] {
        layer.Backward(top.pointers, {true, true}, bottom.pointers);
      },
      {"'my_loss'", "targets"});
}

}  // namespace
}  // namespace crema
