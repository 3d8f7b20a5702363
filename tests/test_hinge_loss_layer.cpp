#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "layers/loss/hinge_loss.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// sum over items and classes of max(0, 1 - t x) (squared for L2) / N, in double.
double ReferenceLoss(const Blob& scores, const Blob& labels, bool l2) {
  const int num = scores.shape(0), classes = scores.count(1);
  double sum = 0;
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < classes; ++c) {
      const double t = c == int(labels.cpu_data()[n]) ? 1.0 : -1.0;
      const double m = std::max(0.0, 1.0 - t * scores.cpu_data()[n * classes + c]);
      sum += l2 ? m * m : m;
    }
  }
  return sum / num;
}

class HingeLossLayerTest : public ::testing::Test {
 protected:
  HingeLossLayerTest() {
    Blob* scores = bottom.Add({4, 5, 1});
    test::FillGaussian(scores, 0.f, 1.5f, 31);
    // Keep every score away from the kinks at +-1, where the loss is not differentiable.
    for (int i = 0; i < scores->count(); ++i) {
      float& v = scores->mutable_cpu_data()[i];
      if (std::fabs(std::fabs(v) - 1.f) < 0.05f) v += v > 0 ? 0.2f : -0.2f;
    }
    Blob* labels = bottom.Add({4});
    RandomStream random(32);
    for (int i = 0; i < 4; ++i) labels->mutable_cpu_data()[i] = float(random.UniformInt(5));
    top.Add({});
  }
  Blob* scores() { return bottom.pointers[0]; }
  Blob* labels() { return bottom.pointers[1]; }
  test::BlobList bottom, top;
};

TEST_F(HingeLossLayerTest, ForwardMatchesReferenceForEachNorm) {
  for (const bool l2 : {false, true}) {
    const std::string text =
        std::string("name: 'loss' type: 'HingeLoss'") + (l2 ? " hinge_loss_param { norm: L2 }" : "");
    HingeLossLayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[0]->num_axes(), 0);
    EXPECT_EQ(layer.loss(0), 1.f);
    const float returned = layer.Forward(bottom.pointers, top.pointers);
    const double expected = ReferenceLoss(*scores(), *labels(), l2);
    ASSERT_GT(expected, 0.0);
    EXPECT_NEAR(top.pointers[0]->cpu_data()[0], expected, 1e-5 * expected) << l2;
    EXPECT_FLOAT_EQ(returned, top.pointers[0]->cpu_data()[0]);
  }
}

TEST_F(HingeLossLayerTest, LossWeightScalesLossAndGradient) {
  HingeLossLayer plain(test::ParseLayer("name: 'loss' type: 'HingeLoss'"));
  plain.SetUp(bottom.pointers, top.pointers);
  const float loss1 = plain.Forward(bottom.pointers, top.pointers);
  plain.Backward(top.pointers, {true, false}, bottom.pointers);
  const std::vector<float> dx1 = test::DiffOf(*scores());
  HingeLossLayer weighted(test::ParseLayer("name: 'loss' type: 'HingeLoss' loss_weight: 2"));
  weighted.SetUp(bottom.pointers, top.pointers);
  const float loss2 = weighted.Forward(bottom.pointers, top.pointers);
  weighted.Backward(top.pointers, {true, false}, bottom.pointers);
  EXPECT_NEAR(loss2, 2.f * loss1, 1e-6 * loss2);
  const std::vector<float> dx2 = test::DiffOf(*scores());
  for (size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx2[i], 2.f * dx1[i], 1e-7);
  EXPECT_GT(test::AbsSum(dx1), 0.0);
}

TEST_F(HingeLossLayerTest, GradientForEachNorm) {
  for (const std::string norm : {"L1", "L2"}) {
    SCOPED_TRACE(norm);
    HingeLossLayer layer(test::ParseLayer("name: 'loss' type: 'HingeLoss' hinge_loss_param { norm: " + norm + " }"));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers, /*check_bottom=*/0);
  }
}

TEST_F(HingeLossLayerTest, RejectsBadLabels) {
  labels()->mutable_cpu_data()[2] = 5.f;
  HingeLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'HingeLoss'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); },
                              {"'my_loss'", "label 5", "index 2"});
  labels()->mutable_cpu_data()[2] = -1.f;
  test::ExpectErrorContaining([&] { layer.Forward(bottom.pointers, top.pointers); }, {"label -1", "index 2"});
}

TEST_F(HingeLossLayerTest, RejectsLabelCountMismatch) {
  labels()->Reshape({5});
  HingeLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'HingeLoss'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                              {"'my_loss'", "5 (5)", "4 5 1 (20)"});
}

TEST_F(HingeLossLayerTest, RefusesGradientToLabels) {
  HingeLossLayer layer(test::ParseLayer("name: 'my_loss' type: 'HingeLoss'"));
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
