#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "layers/loss/infogain_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// softmax along `axis`, then -sum_l H[label, l] log p_l over the non-ignored positions / normalizer, in double.
double ReferenceLoss(const Blob& scores, const Blob& labels, const Blob& h, int axis, const std::string& mode,
                     bool has_ignore, int ignore_label) {
  const int outer = scores.count(0, axis), classes = scores.shape(axis), inner = scores.count(axis + 1);
  double loss = 0;
  int valid = 0;
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int label = int(labels.cpu_data()[n * inner + j]);
      if (has_ignore && label == ignore_label) continue;
      double sum = 0;
      for (int c = 0; c < classes; ++c) sum += std::exp(double(scores.cpu_data()[(n * classes + c) * inner + j]));
      for (int c = 0; c < classes; ++c) {
        const double p = std::exp(double(scores.cpu_data()[(n * classes + c) * inner + j])) / sum;
        loss -= double(h.cpu_data()[label * classes + c]) * std::log(p);
      }
      ++valid;
    }
  }
  double normalizer = 1;
  if (mode == "FULL") normalizer = outer * inner;
  if (mode == "VALID") normalizer = valid;
  if (mode == "BATCH_SIZE") normalizer = outer;
  return loss / std::max(normalizer, 1.0);
}

class InfogainLossLayerTest : public ::testing::Test {
 protected:
  InfogainLossLayerTest() {
    test::FillGaussian(bottom.Add({3, 4, 2}), 0.f, 1.5f, 61);
    Blob* labels = bottom.Add({3, 2});
    RandomStream random(62);
    for (int i = 0; i < labels->count(); ++i) labels->mutable_cpu_data()[i] = float(random.UniformInt(4));
    labels->mutable_cpu_data()[1] = 3.f;  // at least one label 3, the one ignored below
    test::FillUniform(&h, 0.f, 2.f, 63);
    top.Add({});
    BlobProto proto;
    h.ToProto(&proto);
    WriteProtoToBinaryFile(proto, h_path());
  }
  std::string h_path() const { return dir.file("infogain.binaryproto"); }
  std::string WithSource(const std::string& rest = "") const {
    return "name: 'loss' type: 'InfogainLoss' infogain_loss_param { source: '" + h_path() + "' } " + rest;
  }
  Blob* scores() { return bottom.pointers[0]; }
  Blob* labels() { return bottom.pointers[1]; }
  test::TempDir dir;
  Blob h{std::vector<int>{1, 1, 4, 4}};
  test::BlobList bottom, top;
};

TEST_F(InfogainLossLayerTest, ForwardFromSourceMatchesReferenceInEveryMode) {
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    InfogainLossLayer layer(test::ParseLayer(WithSource("loss_param { ignore_label: 3 normalization: " + mode + " }")));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[0]->num_axes(), 0);
    EXPECT_EQ(layer.loss(0), 1.f);
    const float returned = layer.Forward(bottom.pointers, top.pointers);
    const double expected = ReferenceLoss(*scores(), *labels(), h, 1, mode, true, 3);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected) << mode;
    EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
  }
}

TEST_F(InfogainLossLayerTest, ThirdBottomAndProbabilityTop) {
  bottom.owned.push_back(std::make_unique<Blob>(std::vector<int>{4, 4}));
  bottom.pointers.push_back(bottom.owned.back().get());
  std::copy(h.cpu_data(), h.cpu_data() + 16, bottom.pointers[2]->mutable_cpu_data());
  top.Add({});
  InfogainLossLayer layer(test::ParseLayer("name: 'loss' type: 'InfogainLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(layer.loss(1), 0.f);
  ASSERT_EQ(top.pointers[1]->shape(), scores()->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const double expected = ReferenceLoss(*scores(), *labels(), h, 1, "VALID", false, 0);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  // The probabilities sum to 1 over the classes.
  for (int n = 0; n < 3; ++n) {
    for (int j = 0; j < 2; ++j) {
      double sum = 0;
      for (int c = 0; c < 4; ++c) sum += top.pointers[1]->cpu_data()[(n * 4 + c) * 2 + j];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
  EXPECT_FALSE(layer.AllowForceBackward(1));
  EXPECT_FALSE(layer.AllowForceBackward(2));
  test::ExpectErrorContaining(
      [&] {
        layer.Backward(top.pointers, {true, false, true}, bottom.pointers);
      },
      {"'loss'", "infogain matrix (bottom 2)"});

  // The probabilities are an output, not part of the objective: check the gradient of the loss alone.
  const std::vector<Blob*> loss_top = {top.pointers[0]};
  InfogainLossLayer loss_only(test::ParseLayer("name: 'loss' type: 'InfogainLoss'"));
  loss_only.SetUp(bottom.pointers, loss_top);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&loss_only, bottom.pointers, loss_top, /*check_bottom=*/0);
}

TEST_F(InfogainLossLayerTest, AnotherAxis) {
  // Classes along axis 2 of 2 x 3 x 4: the labels hold 2 x 3 values.
  test::BlobList other_bottom, other_top;
  test::FillGaussian(other_bottom.Add({2, 3, 4}), 0.f, 1.f, 64);
  Blob* other_labels = other_bottom.Add({2, 3});
  for (int i = 0; i < 6; ++i) other_labels->mutable_cpu_data()[i] = float(i % 4);
  other_top.Add({});
  InfogainLossLayer layer(test::ParseLayer(
      "name: 'loss' type: 'InfogainLoss' infogain_loss_param { axis: -1 source: '" + h_path() + "' }"));
  layer.SetUp(other_bottom.pointers, other_top.pointers);
  layer.Forward(other_bottom.pointers, other_top.pointers);
  const double expected = ReferenceLoss(*other_bottom.pointers[0], *other_labels, h, 2, "VALID", false, 0);
  EXPECT_NEAR(other_top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, other_bottom.pointers, other_top.pointers, /*check_bottom=*/0);
}

TEST_F(InfogainLossLayerTest, LossWeightScalesLossAndGradient) {
  InfogainLossLayer plain(test::ParseLayer(WithSource()));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, false}, bottom.pointers);
  const std::vector<float> dx1 = test::DiffOf(*scores());
  InfogainLossLayer weighted(test::ParseLayer(WithSource("loss_weight: 2.5")));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss25 = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(loss25, 2.5f * loss1, 1e-6 * loss25);
  const std::vector<float> dx25 = test::DiffOf(*scores());
  for (size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx25[i], 2.5f * dx1[i], 1e-6);
  EXPECT_GT(test::AbsSum(dx1), 0.0);
}

TEST_F(InfogainLossLayerTest, GradientInEveryModeWithIgnoredLabels) {
  for (const std::string mode : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(mode);
    InfogainLossLayer layer(test::ParseLayer(WithSource("loss_param { ignore_label: 3 normalization: " + mode + " }")));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
  }
}

TEST_F(InfogainLossLayerTest, MissingSourceNamesThePath) {
  const std::string missing = dir.file("no_such_H.binaryproto");
  InfogainLossLayer layer(
      test::ParseLayer("name: 'my_loss' type: 'InfogainLoss' infogain_loss_param { source: '" + missing + "' }"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "infogain_loss_param.source", missing});
  InfogainLossLayer no_source(test::ParseLayer("name: 'my_loss' type: 'InfogainLoss'"));
  test::ExpectErrorContaining([&] { no_source.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "infogain_loss_param.source", "third bottom"});
}

TEST_F(InfogainLossLayerTest, RejectsInfogainOfTheWrongSize) {
  bottom.owned.push_back(std::make_unique<Blob>(std::vector<int>{3, 3}));
  bottom.pointers.push_back(bottom.owned.back().get());
  InfogainLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'InfogainLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "3 3 (9)", "4 x 4", "3 4 2 (24)"});
}

TEST_F(InfogainLossLayerTest, RejectsBadLabels) {
  labels()->mutable_cpu_data()[4] = 4.f;
  InfogainLossLayer layer(test::ParseLayer(WithSource()));
  layer.SetUp(bottom.pointers, top.pointers);
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); }, {"'loss'", "label 4", "index 4"});
  labels()->Reshape({3, 3});
  InfogainLossLayer other(test::ParseLayer(WithSource()));
  test::ExpectErrorContaining([&] { other.SetUp(bottom.pointers, top.pointers); }, {"'loss'", "3 3 (9)", "3 4 2"});
}

TEST_F(InfogainLossLayerTest, RefusesGradientToLabels) {
  InfogainLossLayer layer(test::ParseLayer(WithSource()));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(bottom.pointers, top.pointers);
  test::ExpectErrorContaining(
      [&] {
        layer.Backward(top.pointers, {true, true}, bottom.pointers);
      },
      {"'loss'", "labels"});
}

}  // namespace
}  // namespace crema
