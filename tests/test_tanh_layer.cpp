#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/tanh.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(TanHLayerTest, ForwardMatchesReference) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}), 0.f, 3.f);
  top.Add({});
  TanHLayer layer(test::ParseLayer("name: 'tanh' type: 'TanH'"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
    EXPECT_NEAR(y[i], std::tanh(static_cast<double>(x[i])), 1e-6) << i;
  }
}

TEST(TanHLayerTest, SaturatesWithoutNaN) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({2});
  x->mutable_cpu_data()[0] = -200.f;
  x->mutable_cpu_data()[1] = 200.f;
  top.Add({});
  TanHLayer layer(test::ParseLayer("name: 'tanh' type: 'TanH'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], -1.f);
  EXPECT_EQ(top.pointers[0]->cpu_data()[1], 1.f);
}

TEST(TanHLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4}));
  top.Add({});
  TanHLayer layer(test::ParseLayer("name: 'tanh' type: 'TanH'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(TanHLayerTest, InPlaceMatchesOutOfPlace) {
  const LayerParameter param = test::ParseLayer("name: 'tanh' type: 'TanH'");
  const std::vector<int> shape{3, 4, 5};
  Blob top_diff(shape);
  test::FillGaussian(&top_diff, 0.f, 1.f, 99);

  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape));
  top.Add({});
  TanHLayer separate(param);
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  test::FillGaussian(&shared);
  std::vector<Blob*> both{&shared};
  TanHLayer in_place(param);
  in_place.SetUp(both, both);
  in_place.Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]) << i;
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  in_place.Backward(both, {true}, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]) << i;
}

TEST(TanHLayerTest, RejectsWrongArity) {
  test::BlobList bottom, top;
  bottom.Add({2});
  top.Add({});
  top.Add({});
  TanHLayer layer(test::ParseLayer("name: 'tanh' type: 'TanH'"));
  EXPECT_THROW(layer.SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
