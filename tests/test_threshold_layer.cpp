#include <gtest/gtest.h>

#include <vector>

#include "layers/threshold.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(ThresholdLayerTest, ForwardDefaultThresholdIsZero) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ThresholdLayer layer(test::ParseLayer("name: 'thr' type: 'Threshold'"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_EQ(y[i], x[i] > 0.f ? 1.f : 0.f) << i;
}

TEST(ThresholdLayerTest, ForwardStrictlyAboveTheThreshold) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({3, 4});
  test::FillUniform(x, -1.f, 1.f);
  x->mutable_cpu_data()[0] = 0.3f;  // equal to the threshold: 0
  top.Add({});
  ThresholdLayer layer(test::ParseLayer("name: 'thr' type: 'Threshold' threshold_param { threshold: 0.3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const float* y = top.pointers[0]->cpu_data();
  EXPECT_EQ(y[0], 0.f);
  for (int i = 0; i < x->count(); ++i) EXPECT_EQ(y[i], x->cpu_data()[i] > 0.3f ? 1.f : 0.f) << i;
}

TEST(ThresholdLayerTest, InPlace) {
  Blob shared({4, 5});
  test::FillGaussian(&shared);
  const std::vector<float> x = test::DataOf(shared);
  std::vector<Blob*> both{&shared};
  ThresholdLayer layer(test::ParseLayer("name: 'thr' type: 'Threshold' threshold_param { threshold: -0.2 }"));
  layer.SetUp(both, both);
  layer.Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], x[i] > -0.2f ? 1.f : 0.f) << i;
}

TEST(ThresholdLayerTest, BackwardIsAnErrorNamingTheLayer) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  ThresholdLayer layer(test::ParseLayer("name: 'thr' type: 'Threshold'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  // Not asking for the bottom's gradient is fine.
  layer.Backward(top.pointers, {false}, bottom.pointers);
  test::ExpectErrorContaining([&] { layer.Backward(top.pointers, {true}, bottom.pointers); },
                              {"'thr'", "Threshold", "backward"});
}

}  // namespace
}  // namespace crema
