#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/loss/contrastive_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// 1/(2N) sum_n [y d^2 + (1 - y) max(margin - d, 0)^2] (legacy: (1 - y) max(margin - d^2, 0)), in double.
double ReferenceLoss(const Blob& a, const Blob& b, const Blob& y, double margin, bool legacy) {
  const int num = a.shape(0), dim = a.count(1);
  double sum = 0;
  for (int n = 0; n < num; ++n) {
    double d2 = 0;
    for (int k = 0; k < dim; ++k) {
      const double d = double(a.cpu_data()[n * dim + k]) - double(b.cpu_data()[n * dim + k]);
      d2 += d * d;
    }
    if (static_cast<int>(y.cpu_data()[n]) != 0) {
      sum += d2;
    } else if (legacy) {
      sum += std::max(margin - d2, 0.0);
    } else {
      const double gap = std::max(margin - std::sqrt(d2), 0.0);
      sum += gap * gap;
    }
  }
  return sum / num / 2.0;
}

class ContrastiveLossLayerTest : public ::testing::Test {
 protected:
  ContrastiveLossLayerTest() {
    // 6 pairs of 3 values; with margin 2 some dissimilar pairs fall inside the margin and some outside.
    test::FillUniform(bottom.Add({6, 3, 1}), -1.f, 1.f, 51);
    test::FillUniform(bottom.Add({6, 3, 1}), -1.f, 1.f, 52);
    Blob* y = bottom.Add({6, 1});
    const float labels[] = {1, 0, 0, 1, 0, 0};
    std::copy(labels, labels + 6, y->mutable_cpu_data());
    top.Add({});
  }
  Blob* a() { return bottom.pointers[0]; }
  Blob* b() { return bottom.pointers[1]; }
  Blob* y() { return bottom.pointers[2]; }
  test::BlobList bottom, top;
};

TEST_F(ContrastiveLossLayerTest, ForwardMatchesReferenceInBothVersions) {
  for (const bool legacy : {false, true}) {
    for (const double margin : {1.0, 2.0}) {
      const std::string text =
          "name: 'loss' type: 'ContrastiveLoss' contrastive_loss_param { margin: " + std::to_string(margin) +
          " legacy_version: " + (legacy ? "true" : "false") + " }";
      ContrastiveLossLayer layer(test::ParseLayer(text));
      layer.SetUp(bottom.pointers, top.pointers);
      EXPECT_EQ(top.pointers[0]->num_axes(), 0);
      EXPECT_EQ(layer.loss(0), 1.f);
      const float returned = layer.Forward(bottom.pointers, top.pointers);
      const double expected = ReferenceLoss(*a(), *b(), *y(), margin, legacy);
      EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected) << legacy << " " << margin;
      EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
    }
  }
}

TEST_F(ContrastiveLossLayerTest, DefaultMarginIsOne) {
  ContrastiveLossLayer layer(test::ParseLayer("name: 'loss' type: 'ContrastiveLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*a(), *b(), *y(), 1.0, false);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
}

TEST_F(ContrastiveLossLayerTest, LossWeightScalesLossAndGradient) {
  const std::string text = "name: 'loss' type: 'ContrastiveLoss' contrastive_loss_param { margin: 2 }";
  ContrastiveLossLayer plain(test::ParseLayer(text));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, true, false}, bottom.pointers);
  const std::vector<float> da1 = test::DiffOf(*a()), db1 = test::DiffOf(*b());
  ContrastiveLossLayer weighted(test::ParseLayer(text + " loss_weight: 1.5"));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss15 = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, true, false}, bottom.pointers);
  EXPECT_NEAR(loss15, 1.5f * loss1, 1e-6 * loss15);
  const std::vector<float> da15 = test::DiffOf(*a()), db15 = test::DiffOf(*b());
  for (size_t i = 0; i < da1.size(); ++i) {
    EXPECT_NEAR(da15[i], 1.5f * da1[i], 1e-6);
    EXPECT_NEAR(db15[i], 1.5f * db1[i], 1e-6);
    EXPECT_FLOAT_EQ(db1[i], -da1[i]);
  }
  EXPECT_GT(test::AbsSum(da1), 0.0);
}

TEST_F(ContrastiveLossLayerTest, GradientToBothSidesInBothVersions) {
  for (const bool legacy : {false, true}) {
    SCOPED_TRACE(legacy);
    const std::string text = std::string("name: 'loss' type: 'ContrastiveLoss' contrastive_loss_param { margin: 2 ") +
                             "legacy_version: " + (legacy ? "true" : "false") + " }";
    ContrastiveLossLayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    // The 1e-4 that keeps the non-legacy gradient finite shifts it by about 1e-4 relative.
    test::GradientChecker checker(1e-3f, 2e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/1);
  }
}

// As Caffe: a label is truncated toward zero and any non-zero value is similar (2 and -1 similar, 0.5 dissimilar),
// with one warning for the layer naming the first label other than 0 or 1; NaN is refused.
TEST_F(ContrastiveLossLayerTest, ReadsOtherLabelsAsCaffeDoesWithOneWarning) {
  const float labels[] = {1, 0, 0.5f, 2, -1, 0};
  std::copy(labels, labels + 6, y()->mutable_cpu_data());
  ContrastiveLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'ContrastiveLoss' "
                                              "contrastive_loss_param { margin: 2 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::LoggedWarnings warnings;
  for (int pass = 0; pass < 2; ++pass) layer.Forward(bottom.pointers, top.pointers);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], ReferenceLoss(*a(), *b(), *y(), 2.0, false), 1e-5);
  ASSERT_EQ(warnings.lines().size(), 1u);
  for (const char* part : {"'my_loss'", "label 0.5", "index 2", "dissimilar", "as Caffe does"})
    EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
  // The gradients follow the same reading: the pairs labelled 2 and -1 are pulled together.
  test::GradientChecker checker(1e-3f, 2e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);

  y()->mutable_cpu_data()[4] = std::nanf("");
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); },
                              {"'my_loss'", "label nan", "index 4"});
}

TEST_F(ContrastiveLossLayerTest, RejectsMismatchedShapes) {
  b()->Reshape({6, 2, 1});
  ContrastiveLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'ContrastiveLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "6 3 1 (18)", "6 2 1 (12)"});
  b()->Reshape({6, 3, 1});
  y()->Reshape({5});
  ContrastiveLossLayer other(test::ParseLayer("name: 'my_loss' type: 'ContrastiveLoss'"));
  test::ExpectErrorContaining([&] { other.SetUp(bottom.pointers, top.pointers); }, {"'my_loss'", "5 (5)", "6 3 1"});
}

// Caffe gives the similarity labels no gradient even when one is asked for: a warning (once, at set-up when the
// prototxt asks, else at the first backward pass), and zeros.
TEST_F(ContrastiveLossLayerTest, GivesTheLabelsNoGradientWithOneWarning) {
  ContrastiveLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'ContrastiveLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_TRUE(layer.AllowForceBackward(1));
  EXPECT_FALSE(layer.AllowForceBackward(2));
  layer.Forward(bottom.pointers, top.pointers);
  y()->set_diff(5.f);
  test::LoggedWarnings warnings;
  for (int pass = 0; pass < 2; ++pass) layer.Backward(top.pointers, {true, true, true}, bottom.pointers);
  for (int i = 0; i < y()->count(); ++i) EXPECT_EQ(y()->cpu_diff()[i], 0.f);
  ASSERT_EQ(warnings.lines().size(), 1u);
  for (const char* part : {"'my_loss'", "similarity labels", "no gradient", "as Caffe does"})
    EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];

  test::LoggedWarnings at_setup;
  ContrastiveLossLayer asked(test::ParseLayer("name: 'my_loss' type: 'ContrastiveLoss' propagate_down: true "
                                              "propagate_down: true propagate_down: true"));
  asked.SetUp(bottom.pointers, top.pointers);
  asked.Forward(bottom.pointers, top.pointers);
  asked.Backward(top.pointers, {true, true, true}, bottom.pointers);
  ASSERT_EQ(at_setup.lines().size(), 1u);
  EXPECT_NE(at_setup.lines()[0].find("similarity labels"), std::string::npos) << at_setup.lines()[0];
}

}  // namespace
}  // namespace crema
