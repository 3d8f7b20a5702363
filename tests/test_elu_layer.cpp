#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/elu.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Runs the layer out of place and in place on the same input and top gradient: the outputs and the bottom
// gradients must be the same.
template <typename LayerType>
void ExpectInPlaceMatchesOutOfPlace(const LayerParameter& param, const std::function<void(Blob*)>& fill) {
  const std::vector<int> shape{3, 4, 5};
  Blob top_diff(shape);
  test::FillGaussian(&top_diff, 0.f, 1.f, 99);

  test::BlobList bottom, top;
  fill(bottom.Add(shape));
  top.Add({});
  LayerType separate(param);
  separate.SetUp(bottom.pointers, top.pointers);
  separate.Forward(bottom.pointers, top.pointers);
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), top.pointers[0]->mutable_cpu_diff());
  separate.Backward(top.pointers, {true}, bottom.pointers);

  Blob shared(shape);
  fill(&shared);
  std::vector<Blob*> both{&shared};
  LayerType in_place(param);
  in_place.SetUp(both, both);
  in_place.Forward(both, both);
  for (int i = 0; i < shared.count(); ++i) EXPECT_EQ(shared.cpu_data()[i], top.pointers[0]->cpu_data()[i]) << i;
  std::copy(top_diff.cpu_data(), top_diff.cpu_data() + top_diff.count(), shared.mutable_cpu_diff());
  in_place.Backward(both, {true}, both);
  for (int i = 0; i < shared.count(); ++i) {
    EXPECT_EQ(shared.cpu_diff()[i], bottom.pointers[0]->cpu_diff()[i]) << i;
  }
}

double ReferenceELU(double x, double alpha) { return x > 0 ? x : alpha * (std::exp(x) - 1); }

void ExpectForwardMatches(const std::string& text, double alpha) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}), 0.f, 2.f);
  top.Add({});
  ELULayer layer(test::ParseLayer(text));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* y = top.pointers[0]->cpu_data();
  for (int i = 0; i < bottom.pointers[0]->count(); ++i) EXPECT_NEAR(y[i], ReferenceELU(x[i], alpha), 1e-5) << x[i];
}

TEST(ELULayerTest, ForwardDefaultAlphaIsOne) { ExpectForwardMatches("name: 'elu' type: 'ELU'", 1.0); }

TEST(ELULayerTest, ForwardWithAlpha) {
  ExpectForwardMatches("name: 'elu' type: 'ELU' elu_param { alpha: 0.5 }", 0.5);
  ExpectForwardMatches("name: 'elu' type: 'ELU' elu_param { alpha: -0.7 }", -0.7);
}

TEST(ELULayerTest, Gradient) {
  for (const char* text : {"name: 'elu' type: 'ELU'", "name: 'elu' type: 'ELU' elu_param { alpha: 0.5 }",
                           "name: 'elu' type: 'ELU' elu_param { alpha: -0.7 }"}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4}));
    top.Add({});
    ELULayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f, 1701, /*kink=*/0.f, /*kink_range=*/0.02f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(ELULayerTest, InPlaceMatchesOutOfPlace) {
  for (const char* text : {"name: 'elu' type: 'ELU'", "name: 'elu' type: 'ELU' elu_param { alpha: 0.3 }",
                           "name: 'elu' type: 'ELU' elu_param { alpha: 0 }"}) {
    ExpectInPlaceMatchesOutOfPlace<ELULayer>(test::ParseLayer(text), [](Blob* b) { test::FillGaussian(b); });
  }
}

TEST(ELULayerTest, RejectsNegativeAlphaInPlace) {
  Blob shared({4});
  std::vector<Blob*> both{&shared};
  ELULayer layer(test::ParseLayer("name: 'odd' type: 'ELU' elu_param { alpha: -1 }"));
  test::ExpectErrorContaining([&] { layer.SetUp(both, both); }, {"'odd'", "elu_param.alpha", "in place"});
}

TEST(ELULayerTest, RejectsNonFiniteAlpha) {
  test::BlobList bottom, top;
  bottom.Add({4});
  top.Add({});
  ELULayer layer(test::ParseLayer("name: 'odd' type: 'ELU' elu_param { alpha: inf }"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "elu_param.alpha"});
}

}  // namespace
}  // namespace crema
