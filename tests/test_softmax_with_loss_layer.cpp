#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "layers/loss/softmax_with_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Fills `labels` with integers in [0, classes), stored as floats.
void FillLabels(Blob* labels, int classes, uint64_t seed = 3) {
  RandomStream random(seed);
  for (int i = 0; i < labels->count(); ++i) labels->mutable_cpu_data()[i] = float(random.UniformInt(classes));
}

struct Reference {
  double loss;
  std::vector<double> prob;
};

// The loss from the definition, in double: -sum log softmax(x)[label] over the non-ignored positions,
// divided by the normalizer the mode names.
Reference ReferenceLoss(const Blob& scores, const Blob& labels, int axis, const std::string& mode, bool has_ignore,
                        int ignore_label) {
  const int outer = scores.count(0, axis), channels = scores.shape(axis), inner = scores.count(axis + 1);
  Reference result{0, std::vector<double>(scores.count())};
  int valid = 0;
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += std::exp(double(scores.cpu_data()[(n * channels + c) * inner + j]));
      for (int c = 0; c < channels; ++c) {
        const int i = (n * channels + c) * inner + j;
        result.prob[i] = std::exp(double(scores.cpu_data()[i])) / sum;
      }
      const int label = int(labels.cpu_data()[n * inner + j]);
      if (has_ignore && label == ignore_label) continue;
      result.loss -= std::log(result.prob[(n * channels + label) * inner + j]);
      ++valid;
    }
  }
  double normalizer = 1;
  if (mode == "FULL") normalizer = outer * inner;
  if (mode == "VALID") normalizer = valid;
  if (mode == "BATCH_SIZE") normalizer = outer;
  result.loss /= std::max(normalizer, 1.0);
  return result;
}

class SoftmaxWithLossLayerTest : public ::testing::Test {
 protected:
  SoftmaxWithLossLayerTest() {
    test::FillGaussian(bottom.Add({4, 5, 2, 3}), 0.f, 2.f);
    FillLabels(bottom.Add({4, 1, 2, 3}), 5);
    top.Add({});
  }
  Blob* scores() { return bottom.pointers[0]; }
  Blob* labels() { return bottom.pointers[1]; }
  test::BlobList bottom, top;
};

TEST_F(SoftmaxWithLossLayerTest, ForwardMatchesReferenceInEveryMode) {
  // Label 2 ignored, so VALID differs from FULL.
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    const std::string text = "name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 normalization: ";
    SoftmaxWithLossLayer layer(test::ParseLayer(text + mode + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[0]->num_axes(), 0);
    const float returned = layer.Forward(bottom.pointers, top.pointers);
    const Reference expected = ReferenceLoss(*scores(), *labels(), 1, mode, true, 2);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected.loss, 1e-5 * std::max(1.0, expected.loss)) << mode;
    EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]) << mode;  // default loss weight 1
  }
}

TEST_F(SoftmaxWithLossLayerTest, DeprecatedNormalizeChoosesValidOrBatchSize) {
  for (bool normalize : {true, false}) {
    const std::string text = "name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 0 normalize: ";
    SoftmaxWithLossLayer layer(test::ParseLayer(text + (normalize ? "true" : "false") + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    const Reference expected = ReferenceLoss(*scores(), *labels(), 1, normalize ? "VALID" : "BATCH_SIZE", true, 0);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected.loss, 1e-5 * std::max(1.0, expected.loss));
  }
}

TEST_F(SoftmaxWithLossLayerTest, ProbabilityTopAndLossWeights) {
  top.Add({});
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'loss' type: 'SoftmaxWithLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(layer.loss(0), 1.f);
  EXPECT_EQ(layer.loss(1), 0.f);
  ASSERT_EQ(top.pointers[1]->shape(), scores()->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const Reference expected = ReferenceLoss(*scores(), *labels(), 1, "VALID", false, 0);
  for (int i = 0; i < scores()->count(); ++i) EXPECT_NEAR(top.pointers[1]->cpu_data()[i], expected.prob[i], 1e-6);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected.loss, 1e-5);
}

TEST_F(SoftmaxWithLossLayerTest, ExplicitLossWeightScalesTheReturnedLoss) {
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'loss' type: 'SoftmaxWithLoss' loss_weight: 2.5"));
  layer.SetUp(bottom.pointers, top.pointers);
  const float returned = layer.Forward(bottom.pointers, top.pointers);
  EXPECT_FLOAT_EQ(returned, 2.5f * top.pointers[0]->cpu_data()[0]);
}

TEST_F(SoftmaxWithLossLayerTest, GradientInEveryMode) {
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(mode);
    const std::string text = "name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 normalization: ";
    SoftmaxWithLossLayer layer(test::ParseLayer(text + mode + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
  }
}

TEST_F(SoftmaxWithLossLayerTest, ForwardAndGradientAlongAnotherAxis) {
  // Classes along axis 2 of 3 x 2 x 4 x 2: the labels hold 3 x 2 x 2 values.
  test::BlobList other_bottom, other_top;
  test::FillGaussian(other_bottom.Add({3, 2, 4, 2}));
  FillLabels(other_bottom.Add({3, 2, 2}), 4);
  other_top.Add({});
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'loss' type: 'SoftmaxWithLoss' softmax_param { axis: 2 }"));
  layer.SetUp(other_bottom.pointers, other_top.pointers);
  layer.Forward(other_bottom.pointers, other_top.pointers);
  const Reference expected = ReferenceLoss(*other_bottom.pointers[0], *other_bottom.pointers[1], 2, "VALID", false, 0);
  EXPECT_NEAR(other_top.pointers[0]->cpu_data()[0], expected.loss, 1e-5);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, other_bottom.pointers, other_top.pointers, /*check_bottom=*/0);
}

TEST_F(SoftmaxWithLossLayerTest, BackwardIsScaledProbabilityMinusOneHotAndZeroWhereIgnored) {
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  top.pointers[0]->mutable_cpu_diff()[0] = 3.f;
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  const Reference expected = ReferenceLoss(*scores(), *labels(), 1, "VALID", true, 1);
  int valid = 0;
  for (int i = 0; i < labels()->count(); ++i) valid += labels()->cpu_data()[i] != 1.f;
  ASSERT_GT(valid, 0);
  ASSERT_LT(valid, labels()->count());
  const int channels = 5, inner = 6;
  for (int n = 0; n < 4; ++n) {
    for (int c = 0; c < channels; ++c) {
      for (int j = 0; j < inner; ++j) {
        const int i = (n * channels + c) * inner + j;
        const int label = int(labels()->cpu_data()[n * inner + j]);
        const double want = label == 1 ? 0.0 : 3.0 * (expected.prob[i] - (c == label)) / valid;
        EXPECT_NEAR(scores()->cpu_diff()[i], want, 1e-6) << i;
      }
    }
  }
}

TEST_F(SoftmaxWithLossLayerTest, EveryLabelIgnoredGivesZeroLoss) {
  labels()->set_data(4.f);
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 4 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], 0.f);
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_EQ(test::AbsSum(test::DiffOf(*scores())), 0.0);
}

TEST_F(SoftmaxWithLossLayerTest, RejectsLabelOutsideClasses) {
  labels()->mutable_cpu_data()[3] = 5.f;
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SoftmaxWithLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  std::string message = test::ErrorMessage([&] { layer.Forward(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("'my_loss'"), std::string::npos) << message;
  EXPECT_NE(message.find("label 5"), std::string::npos) << message;
  EXPECT_NE(message.find("index 3"), std::string::npos) << message;

  labels()->mutable_cpu_data()[3] = -1.f;
  message = test::ErrorMessage([&] { layer.Forward(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("label -1"), std::string::npos) << message;
  EXPECT_NE(message.find("is not a class in [0, 5)"), std::string::npos) << message;
  // A value that truncates into the classes from above the last one is still outside.
  labels()->mutable_cpu_data()[3] = 5.5f;
  message = test::ErrorMessage([&] { layer.Forward(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("label 5.5"), std::string::npos) << message;
  labels()->mutable_cpu_data()[3] = std::nanf("");
  message = test::ErrorMessage([&] { layer.Forward(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("label nan"), std::string::npos) << message;
}

// Labels from a filler or a regression-style source hold fractions: Caffe truncates them toward zero (2.7 is
// class 2, -0.5 class 0), also before comparing with the ignore_label, and so does crema, warning once.
TEST_F(SoftmaxWithLossLayerTest, FractionalLabelsAreTruncatedTowardZeroWithOneWarning) {
  const std::string with_ignore = "name: 'fractional' type: 'SoftmaxWithLoss' loss_param { ignore_label: 3 }";
  const std::vector<float> whole(labels()->cpu_data(), labels()->cpu_data() + labels()->count());
  SoftmaxWithLossLayer reference(test::ParseLayer(with_ignore));
  reference.SetUp(bottom.pointers, top.pointers);
  reference.Forward(bottom.pointers, top.pointers);
  const float expected_loss = top.pointers[0]->cpu_data()[0];
  reference.Backward(top.pointers, {true, false}, bottom.pointers);
  const std::vector<float> expected_gradient = test::DiffOf(*scores());

  // The same classes as fractions: 0 -> -0.5 or 0.25, c -> c + 0.75; a 3 (ignored) becomes 3.9.
  float* values = labels()->mutable_cpu_data();
  for (int i = 0; i < labels()->count(); ++i) values[i] = whole[i] == 0 ? (i % 2 ? -0.5f : 0.25f) : whole[i] + 0.75f;
  test::LoggedWarnings warnings;
  SoftmaxWithLossLayer layer(test::ParseLayer(with_ignore));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], expected_loss);
  EXPECT_NEAR(ReferenceLoss(*scores(), *labels(), 1, "VALID", true, 3).loss, expected_loss, 1e-5);
  layer.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_EQ(test::DiffOf(*scores()), expected_gradient);
  const std::vector<std::string> lines = warnings.lines();
  ASSERT_EQ(lines.size(), 1u) << "one warning per layer, however many batches";
  std::ostringstream first;
  first << values[0];
  for (const std::string& part :
       std::vector<std::string>{"layer 'fractional' (SoftmaxWithLoss)", "label " + first.str(), "at index 0",
                                "read as " + std::to_string(int(values[0])), "truncated toward zero"})
    EXPECT_NE(lines[0].find(part), std::string::npos) << part << " not in: " << lines[0];
}

TEST_F(SoftmaxWithLossLayerTest, RejectsLabelCountMismatch) {
  labels()->Reshape({4, 5});
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SoftmaxWithLoss'"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("'my_loss'"), std::string::npos) << message;
  EXPECT_NE(message.find("4 5 (20)"), std::string::npos) << message;
  EXPECT_NE(message.find("4 5 2 3 (120)"), std::string::npos) << message;
}

TEST_F(SoftmaxWithLossLayerTest, RefusesGradientToLabels) {
  SoftmaxWithLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'SoftmaxWithLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(bottom.pointers, top.pointers);
  const std::string message = test::ErrorMessage([&] { layer.Backward(top.pointers, {true, true}, bottom.pointers); });
  EXPECT_NE(message.find("'my_loss'"), std::string::npos) << message;
  EXPECT_NE(message.find("labels"), std::string::npos) << message;
}

}  // namespace
}  // namespace crema
