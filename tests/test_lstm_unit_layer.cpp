#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/recurrent/lstm_unit.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

constexpr int kN = 3, kH = 3;

struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<LSTMUnitLayer> layer;
  explicit Fixture(const std::vector<float>& cont) {
    test::FillGaussian(bottom.Add({1, kN, kH}), 0.f, 1.f, 11);
    test::FillGaussian(bottom.Add({1, kN, 4 * kH}), 0.f, 1.f, 12);
    Blob* flags = bottom.Add({1, kN});
    std::copy(cont.begin(), cont.end(), flags->mutable_cpu_data());
    top.Add({});
    top.Add({});
    layer = std::make_unique<LSTMUnitLayer>(test::ParseLayer("name: 'unit' type: 'LSTMUnit'"));
    layer->SetUp(bottom.pointers, top.pointers);
  }
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(LSTMUnitLayerTest, ForwardMatchesTheEquations) {
  // Stream 1 starts a sequence (cont 0): its previous cell is forgotten. Stream 2 has a fractional flag.
  Fixture fixture({1.f, 0.f, 0.5f});
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ASSERT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{1, kN, kH}));
  ASSERT_EQ(fixture.top.pointers[1]->shape(), (std::vector<int>{1, kN, kH}));
  EXPECT_TRUE(fixture.layer->params().empty());
  const std::vector<float> c_prev = test::DataOf(*fixture.bottom.pointers[0]);
  const std::vector<float> x = test::DataOf(*fixture.bottom.pointers[1]);
  const std::vector<float> cont = test::DataOf(*fixture.bottom.pointers[2]);
  const std::vector<float> c = test::DataOf(*fixture.top.pointers[0]);
  const std::vector<float> h = test::DataOf(*fixture.top.pointers[1]);
  for (int n = 0; n < kN; ++n) {
    for (int d = 0; d < kH; ++d) {
      const double i = Sigmoid(x[n * 4 * kH + d]), f = Sigmoid(x[n * 4 * kH + kH + d]);
      const double o = Sigmoid(x[n * 4 * kH + 2 * kH + d]), g = std::tanh(x[n * 4 * kH + 3 * kH + d]);
      const double expected_c = cont[n] * f * c_prev[n * kH + d] + i * g;
      EXPECT_NEAR(c[n * kH + d], expected_c, 1e-5) << "n " << n << " d " << d;
      EXPECT_NEAR(h[n * kH + d], o * std::tanh(expected_c), 1e-5) << "n " << n << " d " << d;
    }
  }
}

TEST(LSTMUnitLayerTest, GradientsOfThePreviousCellAndTheGateInputs) {
  for (const std::vector<float>& cont : {std::vector<float>{1.f, 0.f, 1.f}, std::vector<float>{0.5f, 1.f, 0.f}}) {
    Fixture fixture(cont);
    test::GradientChecker checker(1e-2f, 1e-3f);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 0);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 1);
  }
}

TEST(LSTMUnitLayerTest, ContHasNoGradient) {
  Fixture fixture({1.f, 1.f, 0.f});
  EXPECT_TRUE(fixture.layer->AllowForceBackward(0));
  EXPECT_TRUE(fixture.layer->AllowForceBackward(1));
  EXPECT_FALSE(fixture.layer->AllowForceBackward(2));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  test::ExpectErrorContaining(
      [&] {
        fixture.layer->Backward(fixture.top.pointers, {true, true, true}, fixture.bottom.pointers);
      },
      {"layer 'unit' (LSTMUnit)", "cont", "propagate_down"});
}

TEST(LSTMUnitLayerTest, BadShapesAreNamed) {
  struct Case {
    std::vector<int> c_prev, x, cont;
    std::string part;
  };
  for (const Case& c : std::vector<Case>{{{1, 2, 3}, {1, 2, 11}, {1, 2}, "(1, N, 4H) = (1, 2, 12)"},
                                         {{1, 2, 3}, {1, 3, 12}, {1, 2}, "x 1 3 12"},
                                         {{2, 2, 3}, {1, 2, 12}, {1, 2}, "c_prev must have shape (1, N, H)"},
                                         {{1, 2, 3}, {1, 2, 12}, {2}, "cont must have shape (1, N) = (1, 2)"}}) {
    SCOPED_TRACE(c.part);
    test::BlobList bottom, top;
    bottom.Add(c.c_prev);
    bottom.Add(c.x);
    bottom.Add(c.cont);
    top.Add({});
    top.Add({});
    LSTMUnitLayer layer(test::ParseLayer("name: 'unit' type: 'LSTMUnit'"));
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); },
                                {"layer 'unit' (LSTMUnit)", c.part});
  }
  // Three bottoms, two tops.
  test::BlobList bottom, top;
  bottom.Add({1, 2, 3});
  bottom.Add({1, 2, 12});
  top.Add({});
  top.Add({});
  LSTMUnitLayer layer(test::ParseLayer("name: 'unit' type: 'LSTMUnit'"));
  test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, {"takes 3 bottom blob(s)"});
}

}  // namespace
}  // namespace crema
