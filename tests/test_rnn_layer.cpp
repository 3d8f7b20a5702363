#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/recurrent/rnn.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

constexpr int kT = 3, kN = 2, kH = 3, kD = 4, kDs = 5;

std::string LayerText(const std::string& extra = "") {
  return "name: 'rnn' type: 'RNN' recurrent_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.5 } "
         "bias_filler { type: 'gaussian' std: 0.5 } " +
         extra + " }";
}

// x (T, N, 4); cont starts stream 0 at t = 0 and t = 2 and stream 1 at t = 0 and t = 1 unless given.
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<RNNLayer> layer;
  Fixture(bool with_static, bool expose, std::vector<float> cont = {0, 0, 1, 0, 0, 1},
          const LayerParameter* param = nullptr) {
    test::FillGaussian(bottom.Add({kT, kN, kD}), 0.f, 1.f, 51);
    Blob* flags = bottom.Add({kT, kN});
    std::copy(cont.begin(), cont.end(), flags->mutable_cpu_data());
    if (with_static) test::FillGaussian(bottom.Add({kN, kDs}), 0.f, 1.f, 52);
    top.Add({});
    if (expose) {
      test::FillGaussian(bottom.Add({1, kN, kH}), 0.f, 1.f, 53);
      top.Add({});
    }
    layer =
        std::make_unique<RNNLayer>(param ? *param : test::ParseLayer(LayerText(expose ? "expose_hidden: true" : "")));
    layer->SetUp(bottom.pointers, top.pointers);
    if (!param)
      for (size_t i = 0; i < layer->params().size(); ++i)
        test::FillGaussian(layer->params()[i].get(), 0.f, 0.5f, 60 + i);
  }
};

struct Result {
  std::vector<double> o, h_T;
};

// h = tanh(W_xh x + b_h (+ W_xh_static x_static) + W_hh (cont h_prev)); o = tanh(W_ho h + b_o), in double.
Result Reference(const Fixture& fixture, std::vector<double> h) {
  const std::vector<float> x = test::DataOf(*fixture.bottom.pointers[0]);
  const std::vector<float> cont = test::DataOf(*fixture.bottom.pointers[1]);
  const auto& blobs = fixture.layer->params();
  const bool with_static = blobs.size() == 6;
  const int s = with_static ? 1 : 0;
  const std::vector<float> xs = with_static ? test::DataOf(*fixture.bottom.pointers[2]) : std::vector<float>();
  const std::vector<float> W_xh = test::DataOf(*blobs[0]), b_h = test::DataOf(*blobs[1]);
  const std::vector<float> W_s = with_static ? test::DataOf(*blobs[2]) : std::vector<float>();
  const std::vector<float> W_hh = test::DataOf(*blobs[2 + s]), W_ho = test::DataOf(*blobs[3 + s]);
  const std::vector<float> b_o = test::DataOf(*blobs[4 + s]);
  Result result;
  for (int t = 0; t < kT; ++t) {
    std::vector<double> new_h(kN * kH);
    for (int n = 0; n < kN; ++n) {
      const double flag = cont[t * kN + n];
      for (int j = 0; j < kH; ++j) {
        double a = b_h[j];
        for (int d = 0; d < kD; ++d) a += W_xh[j * kD + d] * x[(t * kN + n) * kD + d];
        for (int e = 0; with_static && e < kDs; ++e) a += W_s[j * kDs + e] * xs[n * kDs + e];
        for (int k = 0; k < kH; ++k) a += W_hh[j * kH + k] * flag * h[n * kH + k];
        new_h[n * kH + j] = std::tanh(a);
      }
    }
    h = new_h;
    for (int n = 0; n < kN; ++n) {
      for (int j = 0; j < kH; ++j) {
        double a = b_o[j];
        for (int k = 0; k < kH; ++k) a += W_ho[j * kH + k] * h[n * kH + k];
        result.o.push_back(std::tanh(a));
      }
    }
  }
  result.h_T = h;
  return result;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5) << what << " at " << i;
}

std::vector<double> Zeros() { return std::vector<double>(kN * kH, 0.0); }

TEST(RNNLayerTest, BlobsInCaffesOrderAndShapes) {
  Fixture plain(false, false);
  ASSERT_EQ(plain.layer->params().size(), 5u);
  // W_xh, b_h, W_hh, W_ho, b_o
  EXPECT_EQ(plain.layer->params()[0]->shape(), (std::vector<int>{kH, kD}));
  EXPECT_EQ(plain.layer->params()[1]->shape(), (std::vector<int>{kH}));
  EXPECT_EQ(plain.layer->params()[2]->shape(), (std::vector<int>{kH, kH}));
  EXPECT_EQ(plain.layer->params()[3]->shape(), (std::vector<int>{kH, kH}));
  EXPECT_EQ(plain.layer->params()[4]->shape(), (std::vector<int>{kH}));
  Fixture with_static(true, false);
  ASSERT_EQ(with_static.layer->params().size(), 6u);
  EXPECT_EQ(with_static.layer->params()[2]->shape(), (std::vector<int>{kH, kDs}));  // W_xh_static
  EXPECT_EQ(with_static.layer->params()[3]->shape(), (std::vector<int>{kH, kH}));   // W_hh
  EXPECT_EQ(plain.top.pointers[0]->shape(), (std::vector<int>{kT, kN, kH}));
  EXPECT_FALSE(plain.layer->AllowForceBackward(1));
}

TEST(RNNLayerTest, ForwardMatchesAReferenceWithSequenceStartsInside) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static ? "static input" : "no static input");
    Fixture fixture(with_static, false);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, Zeros()).o, "o");
  }
}

TEST(RNNLayerTest, ExposedHiddenStateIsAnInputAndAnOutput) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static ? "static input" : "no static input");
    Fixture fixture(with_static, true, {1, 0, 1, 1, 1, 0});
    ASSERT_EQ(fixture.top.pointers.size(), 2u);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    const std::vector<float> h_0 = test::DataOf(*fixture.bottom.pointers[with_static ? 3 : 2]);
    const Result expected = Reference(fixture, std::vector<double>(h_0.begin(), h_0.end()));
    ExpectNear(test::DataOf(*fixture.top.pointers[0]), expected.o, "o");
    EXPECT_EQ(fixture.top.pointers[1]->shape(), (std::vector<int>{1, kN, kH}));
    ExpectNear(test::DataOf(*fixture.top.pointers[1]), expected.h_T, "h_T");
  }
}

TEST(RNNLayerTest, WithoutExposedStateTheLastStateCarriesToTheNextForward) {
  Fixture fixture(false, false, {1, 1, 1, 0, 1, 1});
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  const Result first = Reference(fixture, Zeros());
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), first.o, "first call");
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, first.h_T).o, "second call");
  // Another N starts from zeros again.
  fixture.bottom.pointers[0]->Reshape({kT, 1, kD});
  fixture.bottom.pointers[1]->Reshape({kT, 1});
  fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers);
  EXPECT_EQ(fixture.top.pointers[0]->shape(), (std::vector<int>{kT, 1, kH}));
}

TEST(RNNLayerTest, Gradients) {
  test::GradientChecker checker(1e-2f, 1e-3f);
  {
    Fixture fixture(false, false);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 0);
  }
  {
    Fixture fixture(true, false);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 0);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 2);
  }
  {
    Fixture fixture(false, true, {1, 0, 1, 1, 0, 1});
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 0);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 2);
  }
}

TEST(RNNLayerTest, ContHasNoGradient) {
  Fixture fixture(false, false);
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  test::ExpectErrorContaining(
      [&] {
        fixture.layer->Backward(fixture.top.pointers, {true, true}, fixture.bottom.pointers);
      },
      {"layer 'rnn' (RNN)", "cont", "propagate_down"});
}

TEST(RNNLayerTest, LoadsStoredBlobsOfCaffesShapes) {
  LayerParameter param = test::ParseLayer(LayerText());
  std::vector<std::unique_ptr<Blob>> stored;
  for (const auto& shape : std::vector<std::vector<int>>{{kH, kD}, {kH}, {kH, kH}, {kH, kH}, {kH}}) {
    stored.push_back(std::make_unique<Blob>(shape));
    test::FillGaussian(stored.back().get(), 0.f, 0.5f, 70 + stored.size());
    stored.back()->ToProto(param.add_blobs());
  }
  Fixture fixture(false, false, {0, 0, 1, 0, 0, 1}, &param);
  for (size_t i = 0; i < stored.size(); ++i)
    EXPECT_EQ(test::DataOf(*fixture.layer->params()[i]), test::DataOf(*stored[i])) << "blob " << i;
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, Zeros()).o, "o");

  // W_ho and W_hh swapped in shape cannot be told apart, but a wrong W_ho width can.
  LayerParameter wrong = test::ParseLayer(LayerText());
  for (const auto& shape : std::vector<std::vector<int>>{{kH, kD}, {kH}, {kH, kH}, {kH, kH + 1}, {kH}})
    Blob(shape).ToProto(wrong.add_blobs());
  test::BlobList bottom, top;
  bottom.Add({kT, kN, kD});
  bottom.Add({kT, kN});
  top.Add({});
  RNNLayer mismatched(wrong);
  test::ExpectErrorContaining([&] { mismatched.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'rnn' (RNN)", "W_ho", "3 4 (12)", "3 3 (9)"});
  LayerParameter short_list = test::ParseLayer(LayerText());
  Blob({kH, kD}).ToProto(short_list.add_blobs());
  RNNLayer missing(short_list);
  test::ExpectErrorContaining([&] { missing.SetUp(bottom.pointers, top.pointers); },
                              {"1 blob(s)", "needs 5", "W_xh, b_h, W_hh, W_ho, b_o"});
}

TEST(RNNLayerTest, BadParametersAndShapesAreNamed) {
  struct Case {
    std::string text;
    std::vector<std::vector<int>> bottoms;
    int tops;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"name: 'rnn' type: 'RNN' recurrent_param { }", {{3, 2, 4}, {3, 2}}, 1, {"recurrent_param.num_output"}},
      {LayerText(), {{3, 2, 4}, {2, 3}}, 1, {"cont (bottom 1)", "(T, N) = (3, 2)"}},
      {LayerText(), {{3, 2, 4}, {3, 2}, {1, 5}}, 1, {"x_static (bottom 2)", "N = 2"}},
      {LayerText("expose_hidden: true"), {{3, 2, 4}, {3, 2}, {2, 3}}, 2, {"h_0 (bottom 2)", "(1, N, H) = (1, 2, 3)"}},
      {LayerText("expose_hidden: true"), {{3, 2, 4}, {3, 2}, {2, 5}, {1, 2, 4}}, 2, {"h_0 (bottom 3)"}},
      {LayerText("expose_hidden: true"), {{3, 2, 4}, {3, 2}, {1, 2, 3}}, 1, {"produces 2 top blob(s)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.parts[0]);
    test::BlobList bottom, top;
    for (const auto& shape : c.bottoms) bottom.Add(shape);
    for (int i = 0; i < c.tops; ++i) top.Add({});
    RNNLayer layer(test::ParseLayer(c.text));
    std::vector<std::string> parts = c.parts;
    parts.push_back("layer 'rnn' (RNN)");
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, parts);
  }
}

}  // namespace
}  // namespace crema
