#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/swish.hpp"
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

double ReferenceSwish(double x, double beta) { return x / (1 + std::exp(-beta * x)); }

TEST(SwishLayerTest, ForwardMatchesReference) {
  for (double beta : {1.0, 0.6, -1.3}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4, 5}), 0.f, 2.f);
    top.Add({});
    LayerParameter param = test::ParseLayer("name: 'swish' type: 'Swish'");
    if (beta != 1.0) param.mutable_swish_param()->set_beta(static_cast<float>(beta));
    SwishLayer layer(param);
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    layer.Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      EXPECT_NEAR(y[i], ReferenceSwish(x[i], static_cast<float>(beta)), 2e-6 * std::max(1.f, std::fabs(x[i])))
          << "beta " << beta << " at " << x[i];
    }
  }
}

TEST(SwishLayerTest, Gradient) {
  for (const char* text : {"name: 'swish' type: 'Swish'", "name: 'swish' type: 'Swish' swish_param { beta: 1.7 }",
                           "name: 'swish' type: 'Swish' swish_param { beta: -0.4 }"}) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4}), 0.f, 2.f);
    top.Add({});
    SwishLayer layer(test::ParseLayer(text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(SwishLayerTest, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace<SwishLayer>(test::ParseLayer("name: 'swish' type: 'Swish' swish_param { beta: 0.8 }"),
                                             [](Blob* b) { test::FillGaussian(b); });
}

TEST(SwishLayerTest, KeepsTheSigmoidInAnInternalBlob) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  SwishLayer layer(test::ParseLayer("name: 'swish' type: 'Swish'"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.internal_blob_names().size(), 1u);
  EXPECT_EQ(layer.internal_blob_names()[0], "swish.sigmoid");
  EXPECT_EQ(layer.internal_blobs()[0]->shape(), bottom.pointers[0]->shape());
}

TEST(SwishLayerTest, RejectsNonFiniteBeta) {
  test::BlobList bottom, top;
  bottom.Add({4});
  top.Add({});
  SwishLayer layer(test::ParseLayer("name: 'odd' type: 'Swish' swish_param { beta: nan }"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "swish_param.beta"});
}

}  // namespace
}  // namespace crema
