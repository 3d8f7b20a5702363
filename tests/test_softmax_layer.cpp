#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/common/softmax.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Softmax of `x` along `axis`, in double, straight from the definition (no max subtraction).
std::vector<double> ReferenceSoftmax(const Blob& x, int axis) {
  const int outer = x.count(0, axis), channels = x.shape(axis), inner = x.count(axis + 1);
  std::vector<double> y(x.count());
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += std::exp(double(x.cpu_data()[(n * channels + c) * inner + j]));
      for (int c = 0; c < channels; ++c) {
        const int i = (n * channels + c) * inner + j;
        y[i] = std::exp(double(x.cpu_data()[i])) / sum;
      }
    }
  }
  return y;
}

void ExpectForwardMatches(const std::string& prototxt, const std::vector<int>& shape, int axis) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add(shape), 0.f, 2.f);
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer(prototxt));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), shape);
  layer.Forward(bottom.pointers, top.pointers);
  const std::vector<double> expected = ReferenceSoftmax(*bottom.pointers[0], axis);
  for (int i = 0; i < top.pointers[0]->count(); ++i) {
    EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected[i], 1e-6) << prototxt << " at " << i;
  }
}

TEST(SoftmaxLayerTest, ForwardAlongChannels) { ExpectForwardMatches("name: 'prob' type: 'Softmax'", {2, 5, 3, 4}, 1); }

TEST(SoftmaxLayerTest, ForwardAlongOtherAxes) {
  ExpectForwardMatches("name: 'prob' type: 'Softmax' softmax_param { axis: 2 }", {2, 3, 6, 2}, 2);
  ExpectForwardMatches("name: 'prob' type: 'Softmax' softmax_param { axis: -1 }", {3, 4, 7}, 2);
  ExpectForwardMatches("name: 'prob' type: 'Softmax' softmax_param { axis: 0 }", {6, 5}, 0);
}

// Scores in the thousands overflow exp(); subtracting the maximum keeps the result exact.
TEST(SoftmaxLayerTest, ForwardIsStableForLargeScores) {
  test::BlobList bottom, top;
  Blob* x = bottom.Add({1, 3});
  x->mutable_cpu_data()[0] = 1000.f;
  x->mutable_cpu_data()[1] = 1001.f;
  x->mutable_cpu_data()[2] = -1000.f;
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer("name: 'prob' type: 'Softmax'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const double e = std::exp(1.0);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[0], 1 / (1 + e), 1e-6);
  EXPECT_NEAR(top.pointers[0]->cpu_data()[1], e / (1 + e), 1e-6);
  EXPECT_EQ(top.pointers[0]->cpu_data()[2], 0.f);
}

TEST(SoftmaxLayerTest, GradientAlongChannels) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 4, 3, 2}));
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer("name: 'prob' type: 'Softmax'"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(SoftmaxLayerTest, GradientAlongLastAxis) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 2, 5}));
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer("name: 'prob' type: 'Softmax' softmax_param { axis: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

// The backward pass against the explicit Jacobian: dx_c = sum_k y_k (delta_ck - y_c) dy_k.
TEST(SoftmaxLayerTest, BackwardMatchesJacobian) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 4}));
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer("name: 'prob' type: 'Softmax'"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  Blob* y = top.pointers[0];
  Blob dy_blob({2, 4});
  test::FillGaussian(&dy_blob, 0.f, 1.f, 7);
  const float* dy = dy_blob.cpu_data();
  std::copy(dy, dy + dy_blob.count(), y->mutable_cpu_diff());
  layer.Backward(top.pointers, {true}, bottom.pointers);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 4; ++c) {
      double expected = 0;
      for (int k = 0; k < 4; ++k) {
        const double yc = y->cpu_data()[n * 4 + c], yk = y->cpu_data()[n * 4 + k];
        expected += ((c == k ? yc : 0.0) - yc * yk) * dy[n * 4 + k];
      }
      EXPECT_NEAR(bottom.pointers[0]->cpu_diff()[n * 4 + c], expected, 1e-6);
    }
  }
}

// In place (top = bottom, as Caffe allows) the CPU code and the GPU code rehearsed on the host give the outputs and
// gradients they give out of place: each position's maximum and sum are taken before the values are overwritten,
// and <dy, y> before the gradient is.
TEST(SoftmaxLayerTest, InPlaceMatchesOutOfPlace) {
  for (const bool gpu_code : {false, true}) {
    for (const char* text : {"name: 'prob' type: 'Softmax'", "name: 'prob' type: 'Softmax' softmax_param { axis: -1 }"}) {
      SCOPED_TRACE(std::string(text) + (gpu_code ? " (GPU code on the host)" : " (CPU)"));
      auto context = std::make_shared<Context>();
      context->set_gpu_code_on_host(gpu_code);
      SoftmaxLayer separate(test::ParseLayer(text), context), in_place(test::ParseLayer(text), context);
      EXPECT_TRUE(in_place.AllowsInPlace());
      test::ExpectInPlaceMatchesOutOfPlace(&separate, &in_place, test::Gaussian(), {2, 5, 3});
    }
  }
}

TEST(SoftmaxLayerTest, RejectsAxisOutsideBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  SoftmaxLayer layer(test::ParseLayer("name: 'prob' type: 'Softmax' softmax_param { axis: 2 }"));
  const std::string message = test::ErrorMessage([&] { layer.SetUp(bottom.pointers, top.pointers); });
  EXPECT_NE(message.find("softmax_param.axis"), std::string::npos) << message;
  EXPECT_NE(message.find("'prob'"), std::string::npos) << message;
}

}  // namespace
}  // namespace crema
