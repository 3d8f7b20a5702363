#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layers/recurrent/lstm.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

constexpr int kT = 3, kN = 2, kH = 3, kD = 4, kDs = 5;

std::string LayerText(const std::string& extra = "") {
  return "name: 'lstm' type: 'LSTM' recurrent_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.5 } "
         "bias_filler { type: 'gaussian' std: 0.5 } " +
         extra + " }";
}

// x (T, N, 2, 2) so that D = 4 is the count from axis 2; cont starts stream 0 at t = 0 and t = 2 and stream 1
// at t = 0 and t = 1 unless given.
struct Fixture {
  test::BlobList bottom, top;
  std::unique_ptr<LSTMLayer> layer;
  Fixture(bool with_static, bool expose, std::vector<float> cont = {0, 0, 1, 0, 0, 1},
          const LayerParameter* param = nullptr) {
    test::FillGaussian(bottom.Add({kT, kN, 2, 2}), 0.f, 1.f, 21);
    Blob* flags = bottom.Add({kT, kN});
    std::copy(cont.begin(), cont.end(), flags->mutable_cpu_data());
    if (with_static) test::FillGaussian(bottom.Add({kN, kDs}), 0.f, 1.f, 22);
    top.Add({});
    if (expose) {
      test::FillGaussian(bottom.Add({1, kN, kH}), 0.f, 1.f, 23);
      test::FillGaussian(bottom.Add({1, kN, kH}), 0.f, 1.f, 24);
      top.Add({});
      top.Add({});
    }
    layer =
        std::make_unique<LSTMLayer>(param ? *param : test::ParseLayer(LayerText(expose ? "expose_hidden: true" : "")));
    layer->SetUp(bottom.pointers, top.pointers);
    if (!param)
      for (size_t i = 0; i < layer->params().size(); ++i)
        test::FillGaussian(layer->params()[i].get(), 0.f, 0.5f, 30 + i);
  }
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Result {
  std::vector<double> h, h_T, c_T;
};

// The LSTM written out in double: gate inputs row j of [i f o g] = W_xc x + b_c (+ W_xc_static x_static)
// + W_hc (cont h_prev); c = cont f c_prev + i g; h = o tanh(c).
Result Reference(const Fixture& fixture, std::vector<double> h, std::vector<double> c) {
  const std::vector<float> x = test::DataOf(*fixture.bottom.pointers[0]);
  const std::vector<float> cont = test::DataOf(*fixture.bottom.pointers[1]);
  const auto& blobs = fixture.layer->params();
  const bool with_static = blobs.size() == 4;
  const std::vector<float> xs = with_static ? test::DataOf(*fixture.bottom.pointers[2]) : std::vector<float>();
  const std::vector<float> W_xc = test::DataOf(*blobs[0]), b_c = test::DataOf(*blobs[1]);
  const std::vector<float> W_s = with_static ? test::DataOf(*blobs[2]) : std::vector<float>();
  const std::vector<float> W_hc = test::DataOf(*blobs[with_static ? 3 : 2]);
  Result result;
  for (int t = 0; t < kT; ++t) {
    std::vector<double> new_h(kN * kH), new_c(kN * kH);
    for (int n = 0; n < kN; ++n) {
      const double flag = cont[t * kN + n];
      std::vector<double> a(4 * kH);
      for (int j = 0; j < 4 * kH; ++j) {
        a[j] = b_c[j];
        for (int d = 0; d < kD; ++d) a[j] += W_xc[j * kD + d] * x[(t * kN + n) * kD + d];
        for (int e = 0; with_static && e < kDs; ++e) a[j] += W_s[j * kDs + e] * xs[n * kDs + e];
        for (int k = 0; k < kH; ++k) a[j] += W_hc[j * kH + k] * flag * h[n * kH + k];
      }
      for (int d = 0; d < kH; ++d) {
        const double i = Sigmoid(a[d]), f = Sigmoid(a[kH + d]), o = Sigmoid(a[2 * kH + d]);
        const double g = std::tanh(a[3 * kH + d]);
        new_c[n * kH + d] = flag * f * c[n * kH + d] + i * g;
        new_h[n * kH + d] = o * std::tanh(new_c[n * kH + d]);
      }
    }
    h = new_h;
    c = new_c;
    result.h.insert(result.h.end(), h.begin(), h.end());
  }
  result.h_T = h;
  result.c_T = c;
  return result;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5) << what << " at " << i;
}

std::vector<double> Zeros() { return std::vector<double>(kN * kH, 0.0); }
std::vector<double> Values(const Blob& blob) {
  const std::vector<float> v = test::DataOf(blob);
  return std::vector<double>(v.begin(), v.end());
}

TEST(LSTMLayerTest, BlobsInCaffesOrderAndShapes) {
  Fixture plain(false, false);
  ASSERT_EQ(plain.layer->params().size(), 3u);
  EXPECT_EQ(plain.layer->params()[0]->shape(), (std::vector<int>{4 * kH, kD}));  // W_xc
  EXPECT_EQ(plain.layer->params()[1]->shape(), (std::vector<int>{4 * kH}));      // b_c
  EXPECT_EQ(plain.layer->params()[2]->shape(), (std::vector<int>{4 * kH, kH}));  // W_hc
  Fixture with_static(true, false);
  ASSERT_EQ(with_static.layer->params().size(), 4u);
  EXPECT_EQ(with_static.layer->params()[2]->shape(), (std::vector<int>{4 * kH, kDs}));  // W_xc_static
  EXPECT_EQ(with_static.layer->params()[3]->shape(), (std::vector<int>{4 * kH, kH}));   // W_hc
  EXPECT_EQ(plain.top.pointers[0]->shape(), (std::vector<int>{kT, kN, kH}));
  EXPECT_FALSE(plain.layer->AllowForceBackward(1));
  EXPECT_TRUE(plain.layer->AllowForceBackward(0));
}

TEST(LSTMLayerTest, ForwardMatchesAReferenceWithSequenceStartsInside) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static ? "static input" : "no static input");
    Fixture fixture(with_static, false);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, Zeros(), Zeros()).h, "h");
  }
}

TEST(LSTMLayerTest, ExposedHiddenStatesAreInputsAndOutputs) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static ? "static input" : "no static input");
    // Stream 0 goes on from h_0, c_0; stream 1 starts at t = 0 and again at t = 2.
    Fixture fixture(with_static, true, {1, 0, 1, 1, 1, 0});
    ASSERT_EQ(fixture.top.pointers.size(), 3u);
    fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
    const int first_state = with_static ? 3 : 2;
    const Result expected = Reference(fixture, Values(*fixture.bottom.pointers[first_state]),
                                      Values(*fixture.bottom.pointers[first_state + 1]));
    ExpectNear(test::DataOf(*fixture.top.pointers[0]), expected.h, "h");
    EXPECT_EQ(fixture.top.pointers[1]->shape(), (std::vector<int>{1, kN, kH}));
    ExpectNear(test::DataOf(*fixture.top.pointers[1]), expected.h_T, "h_T");
    ExpectNear(test::DataOf(*fixture.top.pointers[2]), expected.c_T, "c_T");
  }
}

TEST(LSTMLayerTest, WithoutExposedStatesTheLastStatesCarryToTheNextForward) {
  // As Caffe: h_T and c_T of one call are h_0 and c_0 of the next (zeros at first).
  Fixture fixture(false, false, {1, 1, 1, 0, 1, 1});
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  const Result first = Reference(fixture, Zeros(), Zeros());
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), first.h, "first call");
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, first.h_T, first.c_T).h, "second call");
}

TEST(LSTMLayerTest, Gradients) {
  // cont is 0 at t = 0 (and inside): the carried state does not enter, so every forward is the same function.
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
    // Exposed states: the gradients of h_0 and c_0, with h_T and c_T in the objective.
    Fixture fixture(false, true, {1, 0, 1, 1, 0, 1});
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 0);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 2);
    checker.CheckGradient(fixture.layer.get(), fixture.bottom.pointers, fixture.top.pointers, 3);
  }
}

TEST(LSTMLayerTest, ContHasNoGradient) {
  Fixture fixture(false, false);
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  test::ExpectErrorContaining(
      [&] {
        fixture.layer->Backward(fixture.top.pointers, {true, true}, fixture.bottom.pointers);
      },
      {"layer 'lstm' (LSTM)", "cont", "propagate_down"});
}

TEST(LSTMLayerTest, LoadsStoredBlobsOfCaffesShapes) {
  LayerParameter param = test::ParseLayer(LayerText());
  // W_xc, b_c, W_hc as Caffe writes them; the first as a legacy 4-d blob.
  Blob W_xc({1, 1, 4 * kH, kD}), b_c({4 * kH}), W_hc({4 * kH, kH});
  test::FillGaussian(&W_xc, 0.f, 0.5f, 41);
  test::FillGaussian(&b_c, 0.f, 0.5f, 42);
  test::FillGaussian(&W_hc, 0.f, 0.5f, 43);
  W_xc.ToProto(param.add_blobs());
  b_c.ToProto(param.add_blobs());
  W_hc.ToProto(param.add_blobs());
  Fixture fixture(false, false, {0, 0, 1, 0, 0, 1}, &param);
  EXPECT_EQ(fixture.layer->params()[0]->shape(), (std::vector<int>{4 * kH, kD}));
  EXPECT_EQ(test::DataOf(*fixture.layer->params()[2]), test::DataOf(W_hc));
  fixture.layer->Forward(fixture.bottom.pointers, fixture.top.pointers);
  ExpectNear(test::DataOf(*fixture.top.pointers[0]), Reference(fixture, Zeros(), Zeros()).h, "h");

  // Too few blobs (a static input needs W_xc_static too), or a blob of another shape.
  test::BlobList bottom, top;
  bottom.Add({kT, kN, kD});
  bottom.Add({kT, kN});
  bottom.Add({kN, kDs});
  top.Add({});
  LSTMLayer missing(param);
  test::ExpectErrorContaining([&] { missing.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'lstm' (LSTM)", "3 blob(s)", "needs 4", "W_xc_static"});
  LayerParameter wrong = test::ParseLayer(LayerText());
  W_xc.ToProto(wrong.add_blobs());
  b_c.ToProto(wrong.add_blobs());
  Blob W_hc_wrong({4 * kH, kH + 1});
  W_hc_wrong.ToProto(wrong.add_blobs());
  bottom.pointers.pop_back();
  LSTMLayer mismatched(wrong);
  test::ExpectErrorContaining([&] { mismatched.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'lstm' (LSTM)", "W_hc", "12 4 (48)", "12 3 (36)"});
}

TEST(LSTMLayerTest, BadParametersAndShapesAreNamed) {
  struct Case {
    std::string extra;
    std::vector<std::vector<int>> bottoms;
    int tops;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"num_output: 0", {{3, 2, 4}, {3, 2}}, 1, {"recurrent_param.num_output"}},
      {"", {{3, 2, 4}, {3, 1}}, 1, {"cont (bottom 1)", "(T, N) = (3, 2)", "3 1 (3)"}},
      {"", {{3, 2, 4}, {3, 2, 1}}, 1, {"cont (bottom 1)"}},
      {"", {{6}, {6, 1}}, 1, {"x (bottom 0)", "at least 2 axes"}},
      {"", {{3, 2, 4}, {3, 2}, {3, 5}}, 1, {"x_static (bottom 2)", "N = 2", "3 5 (15)"}},
      {"expose_hidden: true",
       {{3, 2, 4}, {3, 2}, {1, 2, 3}, {1, 2, 4}},
       3,
       {"c_0 (bottom 3)", "(1, N, H) = (1, 2, 3)"}},
      {"expose_hidden: true", {{3, 2, 4}, {3, 2}}, 3, {"takes at least 4 bottom blob(s)"}},
      {"expose_hidden: true", {{3, 2, 4}, {3, 2}, {1, 2, 3}, {1, 2, 3}}, 1, {"produces 3 top blob(s)"}},
      {"", {{3, 2, 4}, {3, 2}, {2, 1}, {2, 1}}, 1, {"takes at most 3 bottom blob(s)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.parts[0]);
    std::string text = LayerText(c.extra);
    if (c.extra == "num_output: 0") text = "name: 'lstm' type: 'LSTM' recurrent_param { num_output: 0 }";
    test::BlobList bottom, top;
    for (const auto& shape : c.bottoms) bottom.Add(shape);
    for (int i = 0; i < c.tops; ++i) top.Add({});
    LSTMLayer layer(test::ParseLayer(text));
    std::vector<std::string> parts = c.parts;
    parts.push_back("layer 'lstm' (LSTM)");
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, parts);
  }
  // Another input width after set-up names the weights.
  Fixture fixture(false, false);
  fixture.bottom.pointers[0]->Reshape({kT, kN, kD + 1});
  test::ExpectErrorContaining([&] { fixture.layer->Reshape(fixture.bottom.pointers, fixture.top.pointers); },
                              {"layer 'lstm' (LSTM)", "W_xc", "expect 4"});
}

}  // namespace
}  // namespace crema

namespace crema {
namespace {

TEST(LSTMLayerTest, TrainsInANetWithoutAGradientForCont) {
  Net net(test::ParseNet(R"(
    layer { name: 'input' type: 'Input' top: 'x' top: 'cont' top: 'target'
            input_param { shape { dim: 3 dim: 2 dim: 4 } shape { dim: 3 dim: 2 } shape { dim: 3 dim: 2 dim: 3 } } }
    layer { name: 'lstm' type: 'LSTM' bottom: 'x' bottom: 'cont' top: 'h'
            recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.5 max: 0.5 } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'h' bottom: 'target' top: 'loss' }
  )"));
  EXPECT_EQ(net.layer_by_name("lstm")->engine(), "native");
  test::FillGaussian(net.blob_by_name("x"), 0.f, 1.f, 81);
  test::FillGaussian(net.blob_by_name("target"), 0.f, 0.5f, 82);
  const float cont[] = {0, 0, 1, 0, 1, 1};
  std::copy(cont, cont + 6, net.blob_by_name("cont")->mutable_cpu_data());
  const float loss = net.ForwardBackward();
  EXPECT_GT(loss, 0.f);
  EXPECT_EQ(net.blob_by_name("h")->shape(), (std::vector<int>{3, 2, 3}));
  EXPECT_GT(test::AbsSum(test::DiffOf(*net.layer_by_name("lstm")->params()[2])), 0.0);  // W_hc
}

}  // namespace
}  // namespace crema
