#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/exp.hpp"
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

// y = base^(shift + scale x), in double; base -1 is e.
double ReferenceExp(double x, double base, double scale, double shift) {
  const double b = base == -1 ? std::exp(1.0) : base;
  return std::pow(b, shift + scale * x);
}

struct ExpCase {
  const char* text;
  double base, scale, shift;
};
const ExpCase kCases[] = {
    {"name: 'exp' type: 'Exp'", -1, 1, 0},
    {"name: 'exp' type: 'Exp' exp_param { scale: 0.5 shift: 0.7 }", -1, 0.5, 0.7},
    {"name: 'exp' type: 'Exp' exp_param { base: 2 scale: -0.8 shift: 1.2 }", 2, -0.8, 1.2},
    {"name: 'exp' type: 'Exp' exp_param { base: 0.5 }", 0.5, 1, 0},
};

TEST(ExpLayerTest, ForwardMatchesReference) {
  for (const ExpCase& c : kCases) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4, 5}));
    top.Add({});
    ExpLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    layer.Forward(bottom.pointers, top.pointers);
    const float* x = bottom.pointers[0]->cpu_data();
    const float* y = top.pointers[0]->cpu_data();
    for (int i = 0; i < bottom.pointers[0]->count(); ++i) {
      const double expected = ReferenceExp(x[i], c.base, c.scale, c.shift);
      EXPECT_NEAR(y[i], expected, 2e-6 * std::max(1.0, expected)) << c.text << " at " << x[i];
    }
  }
}

TEST(ExpLayerTest, Gradient) {
  for (const ExpCase& c : kCases) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 4}));
    top.Add({});
    ExpLayer layer(test::ParseLayer(c.text));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

TEST(ExpLayerTest, InPlaceMatchesOutOfPlace) {
  for (const ExpCase& c : kCases) {
    ExpectInPlaceMatchesOutOfPlace<ExpLayer>(test::ParseLayer(c.text), [](Blob* b) { test::FillGaussian(b); });
  }
}

TEST(ExpLayerTest, RejectsNonPositiveBase) {
  for (const char* base : {"0", "-2"}) {
    test::BlobList bottom, top;
    bottom.Add({4});
    top.Add({});
    ExpLayer layer(test::ParseLayer(std::string("name: 'odd' type: 'Exp' exp_param { base: ") + base + " }"));
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"'odd'", "exp_param.base"});
  }
}

}  // namespace
}  // namespace crema
