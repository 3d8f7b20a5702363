#include <gtest/gtest.h>

#include <vector>

#include "test_util.hpp"

namespace crema {
namespace {

TEST(ThresholdLayerTest, ForwardDefaultThresholdIsZero) {
  test::ExpectForwardMatches("name: 'thr' type: 'Threshold'", [](double x) { return x > 0 ? 1.0 : 0.0; });
}

TEST(ThresholdLayerTest, ForwardStrictlyAboveTheThreshold) {
  const auto fill = [](Blob* x) {
    test::FillUniform(x, -1.f, 1.f);
    x->mutable_cpu_data()[0] = 0.3f;  // equal to the threshold: 0
  };
  const std::vector<float> y =
      test::ExpectForwardMatches("name: 'thr' type: 'Threshold' threshold_param { threshold: 0.3 }",
                                 [](double x) { return x > 0.3f ? 1.0 : 0.0; }, {}, fill, {3, 4});
  ASSERT_FALSE(y.empty());
  EXPECT_EQ(y[0], 0.f);
}

TEST(ThresholdLayerTest, InPlace) {
  Blob shared({4, 5});
  test::FillGaussian(&shared);
  const std::vector<float> x = test::DataOf(shared);
  std::vector<Blob*> both{&shared};
  auto layer = test::MakeLayer("name: 'thr' type: 'Threshold' threshold_param { threshold: -0.2 }");
  layer->SetUp(both, both);
  layer->Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], x[i] > -0.2f ? 1.f : 0.f) << i;
}

TEST(ThresholdLayerTest, BackwardIsAnErrorNamingTheLayer) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  auto layer = test::MakeLayer("name: 'thr' type: 'Threshold'");
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  // Not asking for the bottom's gradient is fine.
  layer->Backward(top.pointers, {false}, bottom.pointers);
  test::ExpectErrorContaining([&] { layer->Backward(top.pointers, {true}, bottom.pointers); },
                              {"'thr'", "Threshold", "backward"});
}

}  // namespace
}  // namespace crema
