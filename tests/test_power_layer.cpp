#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/power.hpp"
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

struct PowerCase {
  const char* text;
  double power, scale, shift;
  bool positive_base;  // the inputs must keep shift + scale x > 0 (non-integer power)
};
const PowerCase kCases[] = {
    {"name: 'pow' type: 'Power'", 1, 1, 0, false},
    {"name: 'pow' type: 'Power' power_param { power: 0.37 scale: 0.83 shift: 0.4 }", 0.37, 0.83, 0.4, true},
    {"name: 'pow' type: 'Power' power_param { power: 2 scale: 0.5 shift: -1 }", 2, 0.5, -1, false},
    {"name: 'pow' type: 'Power' power_param { power: 3 scale: -1.5 shift: 0.2 }", 3, -1.5, 0.2, false},
    {"name: 'pow' type: 'Power' power_param { power: -1.5 scale: 1.2 shift: 0.1 }", -1.5, 1.2, 0.1, true},
    {"name: 'pow' type: 'Power' power_param { power: 0 scale: 2 }", 0, 2, 0, false},
    {"name: 'pow' type: 'Power' power_param { power: 2 scale: 0 shift: 3 }", 2, 0, 3, false},
};

void Fill(const PowerCase& c, Blob* blob) {
  if (c.positive_base) {
    test::FillUniform(blob, 0.5f, 2.f);
  } else {
    test::FillGaussian(blob);
  }
}

TEST(PowerLayerTest, ForwardMatchesReference) {
  for (const PowerCase& c : kCases) {
    test::BlobList bottom, top;
    Fill(c, bottom.Add({2, 3, 4, 5}));
    top.Add({});
    PowerLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    layer.Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      const double expected = std::pow(c.shift + c.scale * x[i], c.power);
      EXPECT_NEAR(y[i], expected, 2e-6 * std::max(1.0, std::fabs(expected))) << c.text << " at " << x[i];
    }
  }
}

TEST(PowerLayerTest, Gradient) {
  for (const PowerCase& c : kCases) {
    test::BlobList bottom, top;
    Fill(c, bottom.Add({2, 3, 4}));
    top.Add({});
    PowerLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 2e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

// Where the base is 0 the gradient of power 2 is 0 (Caffe's division by the base gives NaN there).
TEST(PowerLayerTest, GradientAtZeroBase) {
  test::BlobList bottom, top;
  bottom.Add({1})->set_data(2.f);
  top.Add({});
  PowerLayer layer(test::ParseLayer("name: 'pow' type: 'Power' power_param { power: 2 scale: 0.5 shift: -1 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->cpu_data()[0], 0.f);
  top.pointers[0]->set_diff(1.f);
  layer.Backward(top.pointers, {true}, bottom.pointers);
  EXPECT_EQ(bottom.pointers[0]->cpu_diff()[0], 0.f);
}

TEST(PowerLayerTest, InPlaceMatchesOutOfPlace) {
  for (const PowerCase& c : kCases) {
    ExpectInPlaceMatchesOutOfPlace<PowerLayer>(test::ParseLayer(c.text), [&c](Blob* b) { Fill(c, b); });
  }
}

TEST(PowerLayerTest, RejectsNonFiniteParameters) {
  for (const char* field : {"power", "scale", "shift"}) {
    test::BlobList bottom, top;
    bottom.Add({4});
    top.Add({});
    PowerLayer layer(test::ParseLayer(std::string("name: 'odd' type: 'Power' power_param { ") + field + ": nan }"));
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                                {"'odd'", std::string("power_param.") + field});
  }
}

}  // namespace
}  // namespace crema
