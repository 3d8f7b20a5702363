#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/relu.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

float ReferenceReLU(float x, float slope) { return x > 0 ? x : slope * x; }

TEST(ReLULayerTest, ForwardZeroesNegatives) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU'"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_EQ(y[i], ReferenceReLU(x[i], 0.f)) << i;
}

TEST(ReLULayerTest, ForwardLeakyScalesNegatives) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_FLOAT_EQ(y[i], ReferenceReLU(x[i], 0.1f)) << i;
}

TEST(ReLULayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.01f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(ReLULayerTest, GradientLeaky) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}));
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.25 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.01f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

// In place the bottom's data is overwritten by the forward pass and its diff by the backward pass; both must
// still match the out-of-place results.
TEST(ReLULayerTest, InPlaceMatchesOutOfPlace) {
  for (float slope : {0.f, 0.2f}) {
    LayerParameter param = test::ParseLayer("name: 'relu' type: 'ReLU'");
    param.mutable_relu_param()->set_negative_slope(slope);
    const std::vector<int> shape{3, 4, 5};
    Blob top_diff(shape);
    test::FillGaussian(&top_diff, 0.f, 1.f, 99);

    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(shape));
    top.Add({});
    ReLULayer separate(param);
    separate.SetUp(bottom.pointers, top.pointers);
    separate.Forward(bottom.pointers, top.pointers);
    std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
    separate.Backward(top.pointers, {true}, bottom.pointers);

    Blob shared(shape);
    test::FillGaussian(&shared);
    std::vector<Blob*> both{&shared};
    ReLULayer in_place(param);
    in_place.SetUp(both, both);
    in_place.Forward(both, both);
    for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]);
    std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
    in_place.Backward(both, {true}, both);
    for (int i = 0; i < shared.count(); ++i) {
      EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]) << "slope " << slope << " at " << i;
    }
  }
}

TEST(ReLULayerTest, BackwardPassesGradientWhereInputIsPositive) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({10});
  for (int i = 0; i < 10; ++i) x->mutable_cpu_data()[i] = i - 4.5f;
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.5 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  top.pointers[0]->set_diff(2.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(x->cpu_diff()[i], i < 5 ? 1.f : 2.f) << i;
}

TEST(ReLULayerTest, RejectsNegativeSlopeInPlace) {
  Blob shared({4});
  std::vector<Blob*> both{&shared};
  ReLULayer layer(test::ParseLayer("name: 'odd' type: 'ReLU' relu_param { negative_slope: -1 }"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(both, both); });
  EXPECT_NE(message.find("negative_slope"), std::string::npos) << message;
  EXPECT_NE(message.find("'odd'"), std::string::npos) << message;
}

TEST(ReLULayerTest, RejectsWrongArity) {
  test::BlobList bottom, top;
  bottom.Add({2});
  bottom.Add({2});
  top.Add({});
  ReLULayer layer(test::ParseLayer("name: 'relu' type: 'ReLU'"));
  EXPECT_THROW(layer.SetUp(bottom.pointers, top.pointers), Error);
}

}  // namespace
}  // namespace crema
