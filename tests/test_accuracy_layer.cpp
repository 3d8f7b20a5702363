#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "layers/loss/accuracy.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

void FillLabels(Blob* labels, int classes, uint64_t seed = 3) {
  RandomStream random(seed);
  for (int i = 0; i < labels->count(); ++i) labels->mutable_cpu_data()[i] = float(random.UniformInt(classes));
}

struct Expected {
  float accuracy;
  std::vector<float> per_class;
};

// Sorts each position's classes by score and looks for the label among the first k (scores are Gaussian, so
// there are no ties for the sort to break differently from the layer).
Expected ReferenceAccuracy(const Blob& scores, const Blob& labels, int axis, int k, bool has_ignore, int ignore) {
  const int outer = scores.count(0, axis), channels = scores.shape(axis), inner = scores.count(axis + 1);
  std::vector<int> right(channels, 0), total(channels, 0);
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      const int label = int(labels.cpu_data()[n * inner + j]);
      if (has_ignore && label == ignore) continue;
      std::vector<int> order(channels);
      std::iota(order.begin(), order.end(), 0);
      auto score = [&](int c) { return scores.cpu_data()[(n * channels + c) * inner + j]; };
      std::sort(order.begin(), order.end(), [&](int a, int b) { return score(a) > score(b); });
      ++total[label];
      right[label] += std::find(order.begin(), order.begin() + k, label) != order.begin() + k;
    }
  }
  Expected result{0.f, std::vector<float>(channels, 0.f)};
  const int all_right = std::accumulate(right.begin(), right.end(), 0);
  const int all_total = std::accumulate(total.begin(), total.end(), 0);
  result.accuracy = all_total ? float(all_right) / all_total : 0.f;
  for (int c = 0; c < channels; ++c) result.per_class[c] = total[c] ? float(right[c]) / total[c] : 0.f;
  return result;
}

class AccuracyLayerTest : public ::testing::Test {
 protected:
  AccuracyLayerTest() {
    test::FillGaussian(bottom.Add({100, 10}));
    FillLabels(bottom.Add({100}), 10);
    top.Add({});
  }
  Blob* scores() { return bottom.pointers[0]; }
  Blob* labels() { return bottom.pointers[1]; }
  test::BlobList bottom, top;
};

TEST_F(AccuracyLayerTest, TopOne) {
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->num_axes(), 0);
  EXPECT_EQ(layer.loss(0), 0.f);
  EXPECT_EQ(layer.Forward(bottom.pointers, top.pointers), 0.f);
  const Expected expected = ReferenceAccuracy(*scores(), *labels(), 1, 1, false, 0);
  EXPECT_FLOAT_EQ(top.pointers[0]->cpu_data()[0], expected.accuracy);
  // Random scores are right about one time in ten; a layer that always answered 0 or 1 would fail here.
  EXPECT_GT(expected.accuracy, 0.f);
  EXPECT_LT(expected.accuracy, 0.5f);
}

TEST_F(AccuracyLayerTest, TopThree) {
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const Expected expected = ReferenceAccuracy(*scores(), *labels(), 1, 3, false, 0);
  EXPECT_FLOAT_EQ(top.pointers[0]->cpu_data()[0], expected.accuracy);
  EXPECT_GT(expected.accuracy, ReferenceAccuracy(*scores(), *labels(), 1, 1, false, 0).accuracy);
}

TEST_F(AccuracyLayerTest, PerfectScoresGiveOne) {
  scores()->set_data(0.f);
  for (int n = 0; n < 100; ++n) scores()->mutable_cpu_data()[n * 10 + int(labels()->cpu_data()[n])] = 1.f;
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], 1.f);
}

// Equal scores count in the label's favour: no class scores strictly higher.
TEST_F(AccuracyLayerTest, TiesCountAsRight) {
  scores()->set_data(0.5f);
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], 1.f);
}

TEST_F(AccuracyLayerTest, IgnoreLabelAndPerClassTop) {
  top.Add({});
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 2 ignore_label: 4 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[1]->shape(), std::vector<int>{10});
  layer.Forward(bottom.pointers, top.pointers);
  const Expected expected = ReferenceAccuracy(*scores(), *labels(), 1, 2, true, 4);
  EXPECT_FLOAT_EQ(top.pointers[0]->cpu_data()[0], expected.accuracy);
  EXPECT_NE(expected.accuracy, ReferenceAccuracy(*scores(), *labels(), 1, 2, false, 0).accuracy);
  for (int c = 0; c < 10; ++c) EXPECT_FLOAT_EQ(top.pointers[1]->cpu_data()[c], expected.per_class[c]) << c;
  EXPECT_EQ(top.pointers[1]->cpu_data()[4], 0.f);
}

// Fractional labels read as Caffe reads them, truncated toward zero, the ignore_label compared after that.
TEST_F(AccuracyLayerTest, FractionalLabelsAreTruncatedTowardZero) {
  top.Add({});
  float* values = labels()->mutable_cpu_data();
  for (int i = 0; i < labels()->count(); ++i) values[i] += (i % 3) * 0.3f;
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy' accuracy_param { ignore_label: 4 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const Expected expected = ReferenceAccuracy(*scores(), *labels(), 1, 1, true, 4);
  EXPECT_FLOAT_EQ(top.pointers[0]->cpu_data()[0], expected.accuracy);
  for (int c = 0; c < 10; ++c) EXPECT_FLOAT_EQ(top.pointers[1]->cpu_data()[c], expected.per_class[c]) << c;
  EXPECT_EQ(top.pointers[1]->cpu_data()[4], 0.f);
}

TEST_F(AccuracyLayerTest, ClassesAlongAnInnerAxis) {
  test::BlobList spatial_bottom, spatial_top;
  test::FillGaussian(spatial_bottom.Add({4, 5, 3, 2}));
  FillLabels(spatial_bottom.Add({4, 3, 2}), 5);
  spatial_top.Add({});
  spatial_top.Add({});
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 2 }"));
  layer.SetUp(spatial_bottom.pointers, spatial_top.pointers);
  layer.Forward(spatial_bottom.pointers, spatial_top.pointers);
  const Expected expected = ReferenceAccuracy(*spatial_bottom.pointers[0], *spatial_bottom.pointers[1], 1, 2, false, 0);
  EXPECT_FLOAT_EQ(spatial_top.pointers[0]->cpu_data()[0], expected.accuracy);
  for (int c = 0; c < 5; ++c) EXPECT_FLOAT_EQ(spatial_top.pointers[1]->cpu_data()[c], expected.per_class[c]);
}

TEST_F(AccuracyLayerTest, RejectsTopKAboveClassCount) {
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 11 }"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("top_k"), std::string::npos) << message;
  EXPECT_NE(message.find("'acc'"), std::string::npos) << message;
}

TEST_F(AccuracyLayerTest, RejectsBadLabel) {
  labels()->mutable_cpu_data()[7] = 10.f;
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  layer.SetUp(bottom.pointers, top.pointers);
  const std::string message = test::ErrorMessage([&] { layer.Forward(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("label 10"), std::string::npos) << message;
  EXPECT_NE(message.find("index 7"), std::string::npos) << message;
}

TEST_F(AccuracyLayerTest, RejectsLabelCountMismatch) {
  labels()->Reshape({99});
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("99 (99)"), std::string::npos) << message;
  EXPECT_NE(message.find("100 10 (1000)"), std::string::npos) << message;
}

TEST_F(AccuracyLayerTest, HasNoGradient) {
  AccuracyLayer layer(test::ParseLayer("name: 'acc' type: 'Accuracy'"));
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_FALSE(layer.AllowForceBackward(0));
  layer.Forward(bottom.pointers, top.pointers);
  layer.Backward(top.pointers, {false, false}, bottom.pointers);  // nothing asked, nothing done
  EXPECT_THROW(layer.Backward(top.pointers, {true, false}, bottom.pointers), Error);
}

}  // namespace
}  // namespace crema
