#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/log.hpp"
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

// y = log_base(shift + scale x), in double; base -1 is e.
double ReferenceLog(double x, double base, double scale, double shift) {
  const double ln = std::log(shift + scale * x);
  return base == -1 ? ln : ln / std::log(base);
}

struct LogCase {
  const char* text;
  double base, scale, shift;
};
// Inputs are drawn from [0.5, 2], where every case's shift + scale x stays above 0.4.
const LogCase kCases[] = {
    {"name: 'log' type: 'Log'", -1, 1, 0},
    {"name: 'log' type: 'Log' log_param { scale: 0.5 shift: 0.3 }", -1, 0.5, 0.3},
    {"name: 'log' type: 'Log' log_param { base: 2 scale: -0.5 shift: 1.5 }", 2, -0.5, 1.5},
    {"name: 'log' type: 'Log' log_param { base: 0.3 scale: 1.3 }", 0.3, 1.3, 0},
};

void FillPositive(Blob* blob) { test::FillUniform(blob, 0.5f, 2.f); }

TEST(LogLayerTest, ForwardMatchesReference) {
  for (const LogCase& c : kCases) {
    test::BlobList bottom, top;
    FillPositive(bottom.Add({2, 3, 4, 5}));
    top.Add({});
    LogLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    layer.Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      EXPECT_NEAR(y[i], ReferenceLog(x[i], c.base, c.scale, c.shift), 2e-6) << c.text << " at " << x[i];
    }
  }
}

TEST(LogLayerTest, Gradient) {
  for (const LogCase& c : kCases) {
    test::BlobList bottom, top;
    FillPositive(bottom.Add({2, 3, 4}));
    top.Add({});
    LogLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

// The backward pass needs the input, which in place is kept in an internal blob.
TEST(LogLayerTest, InPlaceMatchesOutOfPlace) {
  for (const LogCase& c : kCases) ExpectInPlaceMatchesOutOfPlace<LogLayer>(test::ParseLayer(c.text), FillPositive);
  Blob shared({2});
  std::vector<Blob*> both{&shared};
  LogLayer layer(test::ParseLayer("name: 'log' type: 'Log'"));
  layer.SetUp(both, both);
  ASSERT_EQ(layer.internal_blob_names().size(), 1u);
  EXPECT_EQ(layer.internal_blob_names()[0], "log.input");
}

TEST(LogLayerTest, RejectsBadBase) {
  for (const char* base : {"0", "-2", "1"}) {
    test::BlobList bottom, top;
    bottom.Add({4});
    top.Add({});
    LogLayer layer(test::ParseLayer(std::string("name: 'odd' type: 'Log' log_param { base: ") + base + " }"));
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "log_param.base"});
  }
}

}  // namespace
}  // namespace crema
