#include <dirent.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/formula.hpp"
#include "core/formula_gpu.hpp"
#include "layers/common/expression.hpp"
#include "net/fuse.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter ExpressionParam(const std::vector<std::string>& bottoms, const std::vector<std::string>& formulas) {
  std::string text = "name: 'expr' type: 'Expression'";
  for (const std::string& name : bottoms) text += " bottom: '" + name + "'";
  for (size_t k = 0; k < formulas.size(); ++k) text += " top: 'y" + std::to_string(k) + "'";
  text += " expression_param {";
  for (const std::string& formula : formulas) {
    std::string quoted;
    for (char c : formula) quoted += c == '\'' ? std::string("\\'") : std::string(1, c);
    text += " formula: '" + quoted + "'";
  }
  return test::ParseLayer(text + " }");
}

// Values in [low, high] with a random sign when `signed_values`: away from the kinks at 0 (abs, relu) and the
// domains' edges (log, sqrt).
void FillAway(Blob* blob, float low, float high, bool signed_values, uint64_t seed) {
  test::FillUniform(blob, low, high, seed);
  if (!signed_values) return;
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i)
    if ((i * 7 + static_cast<int>(seed)) % 3 == 0) data[i] = -data[i];
}

struct Case {
  const char* formula;
  std::function<double(double, double)> reference;  // over a and b
};

// Every operator and function, each computed here in double.
const Case kCases[] = {
    {"a + b * 2 - 0.5", [](double a, double b) { return a + b * 2 - 0.5; }},
    {"a / b", [](double a, double b) { return a / b; }},
    {"-a^2 + 2^3^2 / 256", [](double a, double) { return -(a * a) + 2.0; }},  // precedence, right-associative ^
    {"b ^ -a ^ 2 - - + a", [](double a, double b) { return std::pow(b, -(a * a)) + a; }},
    {"a ^ b", [](double a, double b) { return std::pow(std::fabs(a), b); }},
    {"pow(b, 1.5)", [](double, double b) { return std::pow(b, 1.5); }},
    {"exp(a) * log(b)", [](double a, double b) { return std::exp(a) * std::log(b); }},
    {"sqrt(b) + abs(a)", [](double a, double b) { return std::sqrt(b) + std::fabs(a); }},
    {"tanh(a) - sigmoid(b * a)", [](double a, double b) { return std::tanh(a) - 1 / (1 + std::exp(-b * a)); }},
    {"relu(a) + softplus(a * 3)", [](double a, double) { return std::max(a, 0.0) + std::log1p(std::exp(3 * a)); }},
    {"erf(a / 2)", [](double a, double) { return std::erf(a / 2); }},
    {"min(a, b) * max(a, -b)", [](double a, double b) { return std::min(a, b) * std::max(a, -b); }},
    {"where(a > 0, a * b, exp(a) - 1)", [](double a, double b) { return a > 0 ? a * b : std::exp(a) - 1; }},
    {"(a < b) + (a <= b) * 2 + (a >= b) * 4 + (a == a) * 8 + (a != b) * 16",
     [](double a, double b) { return (a < b) + (a <= b) * 2 + (a >= b) * 4 + 8 + (a != b) * 16; }},
    {"`a` * sigmoid(`a`)", [](double a, double) { return a / (1 + std::exp(-a)); }},
};

TEST(ExpressionLayerTest, EveryOperatorAndFunctionComputesItsValue) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.formula);
    test::BlobList bottom, top;
    // a: signed, away from 0; b: positive (log, sqrt, powers of a base), and for "a ^ b" a positive base.
    const bool positive_a = std::string(c.formula) == "a ^ b";
    FillAway(bottom.Add({2, 3, 4}), 0.2f, 1.5f, !positive_a, 3);
    FillAway(bottom.Add({2, 3, 4}), 0.3f, 2.0f, false, 4);
    top.Add({});
    ExpressionLayer layer(ExpressionParam({"a", "b"}, {c.formula}));
    layer.SetUp(bottom.pointers, top.pointers);
    ASSERT_EQ(top.pointers[0]->shape(), bottom.pointers[0]->shape());
    layer.Forward(bottom.pointers, top.pointers);
    for (int i = 0; i < 24; ++i) {
      const double expected = c.reference(bottom.pointers[0]->cpu_data()[i], bottom.pointers[1]->cpu_data()[i]);
      EXPECT_NEAR(top.pointers[0]->cpu_data()[i], expected, 2e-6 * std::max(1.0, std::fabs(expected))) << i;
    }
  }
}

// The symbolic gradients against central differences, for every case above, with a bottom that holds one value
// (broadcast: its gradient is the sum over the elements), several tops, and reductions.
TEST(ExpressionLayerTest, GradientsCheckForEveryFormula) {
  for (const Case& c : kCases) {
    if (std::strchr(c.formula, '<') != nullptr) continue;  // comparisons: piecewise constant
    SCOPED_TRACE(c.formula);
    test::BlobList bottom, top;
    const bool positive_a = std::string(c.formula) == "a ^ b";
    FillAway(bottom.Add({2, 3, 4}), 0.2f, 1.5f, !positive_a, 5);
    FillAway(bottom.Add({2, 3, 4}), 0.3f, 2.0f, false, 6);
    top.Add({});
    ExpressionLayer layer(ExpressionParam({"a", "b"}, {c.formula}));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-3f, 2e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
  for (const std::vector<std::string>& formulas : {std::vector<std::string>{"a * w + b"},
                                                   {"mean((a - b)^2 * w)"},
                                                   {"sum(a * sigmoid(b * w))", "a * b - w"},
                                                   {"where(a > b, a, b) * w", "relu(a) / (1 + w * w)"}}) {
    SCOPED_TRACE(formulas[0]);
    test::BlobList bottom, top;
    FillAway(bottom.Add({3, 5}), 0.1f, 1.2f, true, 7);
    FillAway(bottom.Add({3, 5}), 0.1f, 1.2f, true, 8);
    FillAway(bottom.Add({1}), 0.5f, 0.9f, false, 9);  // w: one value for every element
    for (size_t k = 0; k < formulas.size(); ++k) top.Add({});
    ExpressionLayer layer(ExpressionParam({"a", "b", "w"}, formulas));
    layer.SetUp(bottom.pointers, top.pointers);
    test::GradientChecker checker(1e-3f, 2e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

// Distinct values at least `gap` apart, in a random order: no ties for max and min, nor a step of the numeric
// gradient that changes which element is the largest.
void FillDistinct(Blob* blob, float gap, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(blob->count()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::mt19937 random(static_cast<uint32_t>(seed));
  std::shuffle(order.begin(), order.end(), random);
  for (size_t i = 0; i < order.size(); ++i)
    blob->mutable_cpu_data()[i] = gap * (order[i] - 0.5f * static_cast<float>(order.size()));
}

// Every broadcast and reduction form against central differences: bottoms over all the axes n c h w, over c alone
// (as (C) and as (1, C, 1, 1)), over h w, and one value; reductions over some axes, every axis, nested ones, and
// the shapes of the tops they give.
TEST(ExpressionLayerTest, BroadcastsAndReductionsAlongNamedAxesCheck) {
  struct Form {
    std::string formula;
    std::vector<int> shape;  // the top's
  };
  const Form forms[] = {
      {"x * s + t", {2, 3, 4, 5}},
      {"x * u - w * s", {2, 3, 4, 5}},
      {"sum[h, w](x * s)", {2, 3}},
      {"mean[c](x) * u", {2, 4, 5}},
      {"exp(x - max[c](x)) / sum[c](exp(x - max[c](x)))", {2, 3, 4, 5}},
      {"max[h, w](x) + min[n](x * t)", {2, 3, 4, 5}},
      {"mean((x - t)^2 * w)", {}},
      {"sum(x) * s + max(u)", {3}},
      {"(x - mean[c](x)) / sqrt(mean[c]((x - mean[c](x))^2) + 0.1)", {2, 3, 4, 5}},
      {"sum[n](sum[c, h](x * s) * u)", {4, 5}},
      {"s * u", {3, 4, 5}},
  };
  for (const Form& form : forms) {
    SCOPED_TRACE(form.formula);
    test::BlobList bottom, top;
    FillDistinct(bottom.Add({2, 3, 4, 5}), 0.02f, 81);         // x: n c h w
    FillAway(bottom.Add({3}), 0.3f, 1.2f, true, 82);           // s: c
    FillAway(bottom.Add({1, 3, 1, 1}), 0.3f, 1.2f, true, 83);  // t: c, kept as axes of 1
    FillDistinct(bottom.Add({4, 5}), 0.05f, 84);               // u: h w
    FillAway(bottom.Add({1}), 0.5f, 0.9f, false, 85);          // w: one value
    top.Add({});
    ExpressionLayer layer(ExpressionParam({"x", "s", "t", "u", "w"}, {form.formula}));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(top.pointers[0]->shape(), form.shape);
    test::GradientChecker checker(1e-3f, 2e-3f);
    checker.CheckGradient(&layer, bottom.pointers, top.pointers);
  }
}

// The values of reductions and broadcasts, computed here in double: a softmax over c, a mean over h and w, a
// per-channel scale, a layer normalization over c with a per-channel gain.
TEST(ExpressionLayerTest, ReductionsAndBroadcastsComputeTheirValues) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 4, 5}), 0.f, 1.f, 91);
  test::FillGaussian(bottom.Add({3}), 0.f, 1.f, 92);
  for (int k = 0; k < 4; ++k) top.Add({});
  ExpressionLayer layer(
      ExpressionParam({"x", "g"}, {"exp(x - max[c](x)) / sum[c](exp(x - max[c](x)))", "mean[h, w](x)", "x * g",
                                   "(x - mean[c](x)) / sqrt(mean[c]((x - mean[c](x))^2) + 1e-5) * g"}));
  layer.SetUp(bottom.pointers, top.pointers);
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* g = bottom.pointers[1]->cpu_data();
  const auto at = [](int n, int c, int h, int w) { return ((n * 3 + c) * 4 + h) * 5 + w; };
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) {
        double total = 0, mean = 0, variance = 0;
        for (int c = 0; c < 3; ++c) {
          total += std::exp(static_cast<double>(x[at(n, c, h, w)]));
          mean += x[at(n, c, h, w)] / 3.0;
        }
        for (int c = 0; c < 3; ++c) variance += (x[at(n, c, h, w)] - mean) * (x[at(n, c, h, w)] - mean) / 3.0;
        for (int c = 0; c < 3; ++c) {
          const int i = at(n, c, h, w);
          EXPECT_NEAR(top.pointers[0]->cpu_data()[i], std::exp(static_cast<double>(x[i])) / total, 1e-6);
          EXPECT_NEAR(top.pointers[2]->cpu_data()[i], static_cast<double>(x[i]) * g[c], 1e-6);
          EXPECT_NEAR(top.pointers[3]->cpu_data()[i], (x[i] - mean) / std::sqrt(variance + 1e-5) * g[c], 2e-5);
        }
      }
  ASSERT_EQ(top.pointers[1]->shape(), (std::vector<int>{2, 3}));
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      double mean = 0;
      for (int h = 0; h < 4; ++h)
        for (int w = 0; w < 5; ++w) mean += x[at(n, c, h, w)] / 20.0;
      EXPECT_NEAR(top.pointers[1]->cpu_data()[n * 3 + c], mean, 1e-6);
    }
}

// bottom_axes says what a bottom's shape leaves in doubt, and axes renames the axes.
TEST(ExpressionLayerTest, BottomAxesAndAxisNamesAreTheParams) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 3}), 0.f, 1.f, 95);
  test::FillGaussian(bottom.Add({3}), 0.f, 1.f, 96);
  top.Add({});
  LayerParameter param = ExpressionParam({"x", "v"}, {"sum[row](x * v)"});
  param.mutable_expression_param()->set_axes("batch, row col");
  param.mutable_expression_param()->add_bottom_axes("");
  param.mutable_expression_param()->add_bottom_axes("col");
  ExpressionLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3}));
  layer.Forward(bottom.pointers, top.pointers);
  const float* x = bottom.pointers[0]->cpu_data();
  const float* v = bottom.pointers[1]->cpu_data();
  for (int n = 0; n < 2; ++n)
    for (int col = 0; col < 3; ++col) {
      double sum = 0;
      for (int row = 0; row < 3; ++row) sum += static_cast<double>(x[(n * 3 + row) * 3 + col]) * v[col];
      EXPECT_NEAR(top.pointers[0]->cpu_data()[n * 3 + col], sum, 1e-5);
    }
  // A batch of another size reshapes; a bottom of the wrong size is named.
  bottom.pointers[0]->Reshape({5, 3, 3});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{5, 3}));
  bottom.pointers[1]->Reshape({4});
  test::ExpectErrorContaining([&] { layer.Reshape(bottom.pointers, top.pointers); },
                              {"'expr'", "bottom 'v' has shape", "the axes col", "it must be (3)"});
  param.mutable_expression_param()->set_axes("n c");
  ExpressionLayer wrong(param);
  test::ExpectErrorContaining([&] { wrong.SetUp(bottom.pointers, top.pointers); },
                              {"'expr'", "axes 'n c' names 2 axes", "has 3"});
}

// exp, sigmoid and tanh are computed without calls (vectorised): within a few ulp of double precision's values over
// their whole range, infinity past exp's, and NaN for NaN.
TEST(ExpressionLayerTest, ExpSigmoidAndTanhAreWithinAFewUlp) {
  std::vector<float> values;
  for (float x = 1e-30f; x < 88.7f; x *= 1.0001f) {
    values.push_back(x);
    values.push_back(-x);
  }
  for (float x : {0.f, -0.f, 88.72f, -87.3f, 0.4f, -0.4f, 0.39999998f}) values.push_back(x);
  FormulaGraph graph({"x"}, {"i"});
  const int x = graph.Input(0);
  const std::vector<int> nodes = {graph.Apply(FormulaOp::kExp, x), graph.Apply(FormulaOp::kSigmoid, x),
                                  graph.Apply(FormulaOp::kTanh, x)};
  std::vector<std::vector<float>> results(3, std::vector<float>(values.size()));
  FormulaProgram({graph, {{nodes[0], 1}, {nodes[1], 1}, {nodes[2], 1}}})
      .Run({static_cast<int64_t>(values.size())}, {values.data()},
           {results[0].data(), results[1].data(), results[2].data()});
  const double ulp = std::ldexp(1.0, -23);
  double worst[3] = {0, 0, 0};
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const double expected[3] = {std::exp(v), 1 / (1 + std::exp(-v)), std::tanh(v)};
    for (int k = 0; k < 3; ++k) {
      // exp below -87.3 is 0 (std::exp gives denormals there); otherwise relative error in units of the last place.
      if (k == 0 && values[i] < -87.3f) {
        EXPECT_EQ(results[k][i], 0.f) << v;
        continue;
      }
      if (expected[k] < 1e-37) continue;  // sigmoid of the most negative values: denormal, 0 here
      worst[k] = std::max(worst[k], std::fabs(results[k][i] - expected[k]) / std::fabs(expected[k]) / ulp);
    }
  }
  EXPECT_LE(worst[0], 2.0);
  EXPECT_LE(worst[1], 4.0);
  EXPECT_LE(worst[2], 4.0);
  const float specials[] = {89.f, -100.f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> out(3 * 5);
  std::vector<float> special_values(std::begin(specials), std::end(specials));
  FormulaProgram({graph, {{nodes[0], 1}, {nodes[1], 1}, {nodes[2], 1}}})
      .Run({5}, {special_values.data()}, {out.data(), out.data() + 5, out.data() + 10});
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());  // exp(89)
  EXPECT_EQ(out[1], 0.f);                                     // exp(-100)
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[3], 0.f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5 + 2], 1.f);  // sigmoid(inf)
  EXPECT_EQ(out[5 + 3], 0.f);
  EXPECT_TRUE(std::isnan(out[5 + 4]));
  EXPECT_EQ(out[10 + 2], 1.f);  // tanh(inf)
  EXPECT_EQ(out[10 + 3], -1.f);
  EXPECT_TRUE(std::isnan(out[10 + 4]));
}

// Every function, broadcast and reduction form, forward and gradients, as the CUDA source of one program: it
// compiles with NVRTC (on the host: no GPU needed) to a kernel per pass, and the second compile comes from the disk
// cache.
TEST(ExpressionLayerTest, EveryFormulaCompilesToGpuKernels) {
#ifndef CREMA_USE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  // a and b over n c h w, s over c, u over h w, w one value.
  const AxisMask input_axes[] = {15, 15, 2, 12, 0};
  FormulaGraph graph({"a", "b", "s", "u", "w"}, {"n", "c", "h", "w"}, {std::begin(input_axes), std::end(input_axes)});
  std::vector<std::string> formulas = {"a * s + b * u",
                                       "sum[h, w](a * s)",
                                       "exp(a - max[c](a)) / sum[c](exp(a - max[c](a)))",
                                       "max[h, w](a) + min[n](a * s)",
                                       "mean((a - b)^2 * w)",
                                       "sum(a) * s + max(u)"};
  for (const Case& c : kCases) formulas.push_back(c.formula);
  const std::string folder = ::testing::TempDir() + "/crema_kernel_cache_" + std::to_string(getpid());
  setenv("CREMA_KERNEL_CACHE", folder.c_str(), 1);
  // A program per formula, its value and its gradients: a pass per reduction and one per set of output axes.
  for (const std::string& formula : formulas) {
    SCOPED_TRACE(formula);
    const int node = graph.Parse(formula);
    std::vector<FormulaProgram::Output> outputs = {{node, graph.nodes()[node].axes}};
    const int seed = graph.AddInput("d" + std::to_string(graph.input_names().size()), graph.nodes()[node].axes);
    const std::vector<int> gradients = graph.Differentiate(node, seed);
    for (size_t i = 0; i < 5; ++i)
      if (gradients[i] >= 0) outputs.push_back({gradients[i], input_axes[i]});
    const FormulaProgram program(graph, outputs);
    const std::string source = program.CudaSource("crema_formula");
    std::string ptx;
    try {
      ptx = CompileCudaToPtx(source, 9, 0);
    } catch (const Error& error) {
      FAIL() << error.what() << "\n" << source;
    }
    for (int p = 0; p < program.passes(); ++p)
      EXPECT_NE(ptx.find(".entry crema_formula_" + std::to_string(p)), std::string::npos) << p;
    // From the cache the second time: the same text.
    EXPECT_EQ(CompileCudaToPtx(source, 9, 0), ptx);
  }
  int files = 0;
  if (DIR* dir = opendir(folder.c_str())) {
    while (dirent* entry = readdir(dir)) files += std::string(entry->d_name).rfind("formula-", 0) == 0;
    closedir(dir);
  }
  EXPECT_EQ(files, static_cast<int>(formulas.size()));
  // A source that does not compile is an error with NVRTC's log.
  test::ExpectErrorContaining([] { CompileCudaToPtx("__global__ void broken() { undeclared = 1; }", 9, 0); },
                              {"NVRTC cannot compile", "undeclared"});
  unsetenv("CREMA_KERNEL_CACHE");
#endif
}

// Built-in layers and the same written as formulas: the same outputs and gradients within 1e-6 of their scale.
TEST(ExpressionLayerTest, FormulasGiveTheBuiltInLayersResults) {
  struct Pair {
    std::string builtin;
    std::vector<std::string> bottoms;
    std::string formula;
  };
  const Pair pairs[] = {
      {"type: 'Swish'", {"x"}, "x * sigmoid(x)"},
      {"type: 'ELU' elu_param { alpha: 0.7 }", {"x"}, "where(x > 0, x, 0.7 * (exp(x) - 1))"},
      {"type: 'Sigmoid'", {"x"}, "sigmoid(x)"},
      {"type: 'TanH'", {"x"}, "tanh(x)"},
      {"type: 'Power' power_param { power: 2.5 scale: 0.7 shift: 1.5 }", {"x"}, "(1.5 + 0.7 * x) ^ 2.5"},
      {"type: 'Eltwise' eltwise_param { operation: PROD }", {"x", "z"}, "x * z"},
  };
  for (const Pair& pair : pairs) {
    SCOPED_TRACE(pair.formula);
    test::BlobList bottom, top, bottom2, top2;
    for (size_t i = 0; i < pair.bottoms.size(); ++i) {
      FillAway(bottom.Add({2, 3, 5, 4}), 0.05f, 2.0f, true, 11 + i);
      Blob* copy = bottom2.Add({2, 3, 5, 4});
      std::memcpy(copy->mutable_cpu_data(), bottom.pointers[i]->cpu_data(), sizeof(float) * copy->count());
    }
    top.Add({});
    top2.Add({});
    std::string text = "name: 'builtin' " + pair.builtin;
    for (const std::string& name : pair.bottoms) text += " bottom: '" + name + "'";
    auto builtin = test::MakeLayer(text + " top: 'y'");
    ExpressionLayer expression(ExpressionParam(pair.bottoms, {pair.formula}));
    builtin->SetUp(bottom.pointers, top.pointers);
    expression.SetUp(bottom2.pointers, top2.pointers);
    builtin->Forward(bottom.pointers, top.pointers);
    expression.Forward(bottom2.pointers, top2.pointers);
    test::FillGaussian(top.pointers[0], 0.f, 1.f, 21);  // the top's gradient, the same for both
    std::memcpy(top.pointers[0]->mutable_cpu_diff(), top.pointers[0]->cpu_data(), sizeof(float) * 120);
    test::FillGaussian(top2.pointers[0], 0.f, 1.f, 21);
    std::memcpy(top2.pointers[0]->mutable_cpu_diff(), top2.pointers[0]->cpu_data(), sizeof(float) * 120);
    builtin->Forward(bottom.pointers, top.pointers);
    expression.Forward(bottom2.pointers, top2.pointers);
    const std::vector<bool> down(pair.bottoms.size(), true);
    builtin->Backward(top.pointers, down, bottom.pointers);
    expression.Backward(top2.pointers, down, bottom2.pointers);
    const auto close = [](const std::vector<float>& x, const std::vector<float>& y, const char* what) {
      ASSERT_EQ(x.size(), y.size());
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 1e-6 * std::max(1.0, std::fabs(static_cast<double>(y[i])))) << what << " " << i;
    };
    close(test::DataOf(*top2.pointers[0]), test::DataOf(*top.pointers[0]), "top");
    for (size_t i = 0; i < pair.bottoms.size(); ++i)
      close(test::DiffOf(*bottom2.pointers[i]), test::DiffOf(*bottom.pointers[i]), "bottom gradient");
  }
}

// Equal subexpressions are one node, in a formula, across formulas and between a formula and its gradient; a
// program makes one pass whatever its length.
TEST(ExpressionLayerTest, EqualSubexpressionsAreOneNode) {
  FormulaGraph graph({"x", "y"}, {"i"});
  const int first = graph.Parse("x * sigmoid(x) + y");
  const size_t nodes = graph.nodes().size();
  EXPECT_EQ(graph.Parse("y + sigmoid(x) * x"), first);  // commuted operands
  EXPECT_EQ(graph.nodes().size(), nodes);
  const int seed = graph.AddInput("dy", 1);
  const std::vector<int> gradients = graph.Differentiate(first, seed);
  EXPECT_EQ(gradients[1], seed);  // d/dy of (... + y) is the seed itself
  // d/dx = dy * (sigmoid(x) + x * sigmoid(x) * (1 - sigmoid(x))): sigmoid(x) is the forward's node.
  const std::string described = graph.Describe(gradients[0]);
  EXPECT_NE(described.find("sigmoid(x)"), std::string::npos) << described;
  int sigmoids = 0;
  for (const FormulaNode& node : graph.nodes()) sigmoids += node.op == FormulaOp::kSigmoid;
  EXPECT_EQ(sigmoids, 1);
  // Constants fold, and multiplying by one or adding zero leaves the operand.
  EXPECT_EQ(graph.Parse("(2 + 3) * 0 + x * 1"), graph.Input(0));
}

// Costly values forward computes and backward needs are kept (in a top where a top is that value, else in an
// internal blob), and backward declares to the memory plan only what it reads.
TEST(ExpressionLayerTest, BackwardKeepsTheCostlyValuesAndDeclaresWhatItReads) {
  struct Expectation {
    std::vector<std::string> formulas;
    size_t internal;
    std::vector<bool> reads_bottom, reads_top;
  };
  const Expectation expectations[] = {
      {{"a * sigmoid(a)"}, 1, {true, false}, {false}},                // sigmoid(a) kept, a read
      {{"sigmoid(a)"}, 0, {false, false}, {true}},                    // the top is sigmoid(a)
      {{"a * b"}, 0, {true, true}, {false}},                          // nothing costly
      {{"exp(a) + b"}, 1, {false, false}, {false}},                   // d/da = exp(a), kept; d/db = 1
      {{"tanh(a)", "tanh(a) * b"}, 0, {false, true}, {true, false}},  // top 0 serves top 1's gradient too
  };
  for (const Expectation& e : expectations) {
    SCOPED_TRACE(e.formulas[0]);
    test::BlobList bottom, top;
    FillAway(bottom.Add({3, 4}), 0.2f, 1.0f, true, 51);
    FillAway(bottom.Add({3, 4}), 0.2f, 1.0f, true, 52);
    for (size_t k = 0; k < e.formulas.size(); ++k) top.Add({});
    ExpressionLayer layer(ExpressionParam({"a", "b"}, e.formulas));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(layer.internal_blobs().size(), e.internal);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(layer.BackwardReadsBottom(i), e.reads_bottom[i]) << "bottom " << i;
    for (size_t k = 0; k < e.formulas.size(); ++k)
      EXPECT_EQ(layer.BackwardReadsTop(static_cast<int>(k)), e.reads_top[k]) << "top " << k;
    // What backward does not read may be anything by then: overwritten, the gradients are the same.
    layer.Forward(bottom.pointers, top.pointers);
    for (Blob* blob : top.pointers) test::FillGaussian(blob, 0.f, 1.f, 53);
    for (Blob* blob : top.pointers)
      std::memcpy(blob->mutable_cpu_diff(), blob->cpu_data(), sizeof(float) * blob->count());
    layer.Forward(bottom.pointers, top.pointers);
    layer.Backward(top.pointers, {true, true}, bottom.pointers);
    const std::vector<float> expected_a = test::DiffOf(*bottom.pointers[0]),
                             expected_b = test::DiffOf(*bottom.pointers[1]);
    for (int i = 0; i < 2; ++i)
      if (!e.reads_bottom[i]) test::FillGaussian(bottom.pointers[i], 5.f, 1.f, 54);
    for (size_t k = 0; k < e.formulas.size(); ++k)
      if (!e.reads_top[k]) {
        // Overwrite the data, keep the gradient.
        std::vector<float> diff = test::DiffOf(*top.pointers[k]);
        test::FillGaussian(top.pointers[k], 5.f, 1.f, 55);
        std::memcpy(top.pointers[k]->mutable_cpu_diff(), diff.data(), sizeof(float) * diff.size());
      }
    layer.Backward(top.pointers, {true, true}, bottom.pointers);
    EXPECT_EQ(test::DiffOf(*bottom.pointers[0]), expected_a);
    EXPECT_EQ(test::DiffOf(*bottom.pointers[1]), expected_b);
  }
}

// Reductions (a mean, a sum over an axis, a broadcast bottom's gradient) add in fixed blocks and then in block order:
// the same bits on one thread and on several.
TEST(ExpressionLayerTest, SumsAreTheSameOnAnyThreadCount) {
  const int saved = omp_get_max_threads();
  std::vector<float> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({1 << 18}), 0.f, 1.f, 31);
    FillAway(bottom.Add({1}), 0.5f, 0.6f, false, 32);
    top.Add({});
    ExpressionLayer layer(ExpressionParam({"a", "w"}, {"mean(exp(a * w))"}));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    top.pointers[0]->mutable_cpu_diff()[0] = 1.f;
    layer.Backward(top.pointers, {true, true}, bottom.pointers);
    std::vector<float> run = {top.pointers[0]->cpu_data()[0], bottom.pointers[1]->cpu_diff()[0]};
    // Reductions over an axis: long runs (along c, in blocks) and short ones (along n), and a per-channel bottom's
    // gradient (summed along n).
    test::BlobList bottom2, top2;
    test::FillGaussian(bottom2.Add({3, 70001}), 0.f, 1.f, 33);
    test::FillGaussian(bottom2.Add({70001}), 0.f, 1.f, 34);
    top2.Add({});
    top2.Add({});
    ExpressionLayer axes(ExpressionParam({"x", "s"}, {"sum[c](x * x)", "sum[n](x * s)"}));
    axes.SetUp(bottom2.pointers, top2.pointers);
    axes.Forward(bottom2.pointers, top2.pointers);
    test::FillGaussian(top2.pointers[1], 0.f, 1.f, 35);
    std::memcpy(top2.pointers[1]->mutable_cpu_diff(), top2.pointers[1]->cpu_data(), sizeof(float) * 70001);
    std::fill_n(top2.pointers[0]->mutable_cpu_diff(), 3, 1.f);
    axes.Forward(bottom2.pointers, top2.pointers);
    axes.Backward(top2.pointers, {true, true}, bottom2.pointers);
    const std::vector<float> sums = test::DataOf(*top2.pointers[0]), columns = test::DataOf(*top2.pointers[1]),
                             gradient = test::DiffOf(*bottom2.pointers[1]);
    run.insert(run.end(), sums.begin(), sums.end());
    run.insert(run.end(), columns.begin(), columns.begin() + 1000);
    run.insert(run.end(), gradient.begin(), gradient.begin() + 1000);
    // The long sums against double.
    for (int n = 0; n < 3; ++n) {
      double sum = 0;
      for (int c = 0; c < 70001; ++c)
        sum += std::pow(static_cast<double>(bottom2.pointers[0]->cpu_data()[n * 70001 + c]), 2);
      EXPECT_NEAR(sums[n], sum, 1e-6 * sum);
    }
    results.insert(results.end(), run.begin(), run.end());
  }
  omp_set_num_threads(saved);
  const size_t each = results.size() / 3;
  for (size_t r = each; r < results.size(); ++r)
    EXPECT_EQ(std::memcmp(&results[r], &results[r % each], sizeof(float)), 0) << r;
}

// A net whose activation and loss are formulas trains as the same net with the built-in Swish and EuclideanLoss
// (mean((y - t)^2) with loss_weight 0.5 is EuclideanLoss's sum over 2N): the same losses, step after step.
TEST(ExpressionLayerTest, ANetWithFormulasTrainsAsWithTheBuiltInLayers) {
  const auto net_text = [](const std::string& activation, const std::string& loss) {
    return R"(
      force_backward: true
      layer { name: 'data' type: 'Input' top: 'x' top: 't' input_param { shape { dim: 64 dim: 4 } shape { dim: 64 dim: 1 } } }
      layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h' inner_product_param { num_output: 16
              weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.1 } } })" +
           activation + R"(
      layer { name: 'ip2' type: 'InnerProduct' bottom: 'a' top: 'y' inner_product_param { num_output: 1
              weight_filler { type: 'gaussian' std: 0.5 } } })" +
           loss;
  };
  Net formulas(test::ParseNet(net_text(
                   "layer { name: 'act' type: 'Expression' bottom: 'h' top: 'a' "
                   "expression_param { formula: 'h * sigmoid(h)' } }",
                   "layer { name: 'loss' type: 'Expression' bottom: 'y' bottom: 't' top: 'loss' loss_weight: 0.5 "
                   "expression_param { formula: 'mean((y - t)^2)' } }")),
               std::make_shared<Context>(Device::kCPU, 0, 3));
  Net builtin(
      test::ParseNet(net_text("layer { name: 'act' type: 'Swish' bottom: 'h' top: 'a' }",
                              "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' top: 'loss' }")),
      std::make_shared<Context>(Device::kCPU, 0, 3));
  std::vector<float> losses[2];
  Net* nets[2] = {&formulas, &builtin};
  for (int k = 0; k < 2; ++k) {
    Net& net = *nets[k];
    test::FillGaussian(net.input_blobs()[0], 0.f, 1.f, 41);
    // The target: a smooth function of the inputs.
    const float* x = net.input_blobs()[0]->cpu_data();
    float* t = net.input_blobs()[1]->mutable_cpu_data();
    for (int n = 0; n < 64; ++n) t[n] = std::tanh(x[4 * n] - 0.5f * x[4 * n + 1] + 0.25f * x[4 * n + 2] * x[4 * n + 3]);
    for (int step = 0; step < 60; ++step) {
      net.ClearParamDiffs();
      losses[k].push_back(net.ForwardBackward());
      for (Blob* param : net.learnable_params())
        for (int i = 0; i < param->count(); ++i) param->mutable_cpu_data()[i] -= 0.1f * param->cpu_diff()[i];
    }
  }
  for (size_t step = 0; step < losses[0].size(); ++step)
    EXPECT_NEAR(losses[0][step], losses[1][step], 1e-4 * losses[1][step]) << step;
  EXPECT_LT(losses[0].back(), 0.5f * losses[0].front());
}

// In a net a blob read by several layers reaches each through a copy of a Split (renamed); the formulas still name
// it as the prototxt does. bottom_name gives the bottoms other names.
TEST(ExpressionLayerTest, FormulasNameBottomsAsThePrototxtDoesInANet) {
  Net net(test::ParseNet(R"(
    layer { name: 'data' type: 'Input' top: 'conv/out' top: 'w' input_param { shape { dim: 2 dim: 3 } shape { dim: 1 } } }
    layer { name: 'twice' type: 'Expression' bottom: 'conv/out' top: 'a' expression_param { formula: '2 * `conv/out`' } }
    layer { name: 'alias' type: 'Expression' bottom: 'conv/out' bottom: 'w' top: 'b'
            expression_param { formula: 'x * w' bottom_name: 'x' bottom_name: 'w' } }
    layer { name: 'sum' type: 'Expression' bottom: 'a' bottom: 'b' bottom: 'conv/out' top: 'c'
            expression_param { formula: 'a + b - `conv/out`' } })"),
          std::make_shared<Context>(Device::kCPU, 0, 1));
  // 'conv/out' has three readers: each reads a Split's copy.
  int splits = 0;
  for (const auto& layer : net.layers()) splits += std::string(layer->type()) == "Split";
  EXPECT_GE(splits, 1);
  test::FillGaussian(net.input_blobs()[0], 0.f, 1.f, 61);
  net.input_blobs()[1]->mutable_cpu_data()[0] = 3.f;
  net.Forward();
  const float* x = net.input_blobs()[0]->cpu_data();
  const float* c = net.blob_by_name("c")->cpu_data();
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(c[i], 2 * x[i] + x[i] * 3.f - x[i]) << i;
  test::ExpectErrorContaining(
      [] {
        Net bad(test::ParseNet(R"(
          layer { name: 'data' type: 'Input' top: 'x' input_param { shape { dim: 2 } } }
          layer { name: 'e' type: 'Expression' bottom: 'x' top: 'y' expression_param { formula: 'x' bottom_name: 'a' bottom_name: 'b' } })"),
                std::make_shared<Context>(Device::kCPU, 0, 1));
      },
      {"'e'", "2 bottom_name for 1 bottoms"});
}

// A net of element layers, the same with fuse_elements: the outputs and the input's gradient of both, one forward
// and backward pass on the same input and top gradient.
struct FusedRun {
  std::vector<std::string> types;  // the layer types of the built net
  std::vector<float> y, dx, dz;    // the output, the gradients of the inputs x and z
};
FusedRun RunElements(const std::string& layers, bool fuse) {
  NetParameter param = test::ParseNet(
      "force_backward: true layer { name: 'data' type: 'Input' top: 'x' top: 'z' "
      "input_param { shape { dim: 4 dim: 50 } shape { dim: 4 dim: 50 } } }" +
      layers);
  param.set_fuse_elements(fuse);
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, 1));
  FusedRun run;
  for (const auto& layer : net.layers()) run.types.push_back(layer->type());
  FillAway(net.input_blobs()[0], 0.05f, 1.5f, true, 71);
  FillAway(net.input_blobs()[1], 0.05f, 1.5f, true, 73);
  net.Forward();
  Blob* y = net.blob_by_name("y");
  run.y = test::DataOf(*y);
  // The top's gradient, set after forward (the memory plan may give its bytes to forward's buffers before).
  Blob gradient(y->shape());
  test::FillGaussian(&gradient, 0.f, 1.f, 72);
  std::memcpy(y->mutable_cpu_diff(), gradient.cpu_data(), sizeof(float) * y->count());
  net.Backward();
  run.dx = test::DiffOf(*net.input_blobs()[0]);
  run.dz = test::DiffOf(*net.input_blobs()[1]);
  return run;
}

// Every element layer the pass fuses, in runs (out of place and in place after the first), gives the unfused net's
// outputs and input gradient within float rounding, as one Expression layer.
TEST(FuseElementsTest, RunsOfElementLayersBecomeOneExpressionWithTheSameResults) {
  // In place only where no earlier layer's backward reads the blob the in-place layer overwrites (a TanH in place
  // followed by a Power in place would hand TanH's backward the power's output, as in Caffe).
  const std::string runs[] = {
      R"(layer { name: 'p1' type: 'Power' bottom: 'x' top: 'a' power_param { scale: 0.5 shift: 1 } }
         layer { name: 't' type: 'TanH' bottom: 'a' top: 'a' }
         layer { name: 'p2' type: 'Power' bottom: 'a' top: 'c' power_param { power: 2 } }
         layer { name: 's' type: 'Sigmoid' bottom: 'c' top: 'b' }
         layer { name: 'r' type: 'AbsVal' bottom: 'b' top: 'y' })",
      R"(layer { name: 'leaky' type: 'ReLU' bottom: 'x' top: 'a' relu_param { negative_slope: 0.1 } }
         layer { name: 'elu' type: 'ELU' bottom: 'a' top: 'b' elu_param { alpha: 0.7 } }
         layer { name: 'swish' type: 'Swish' bottom: 'b' top: 'c' swish_param { beta: 1.3 } }
         layer { name: 'bnll' type: 'BNLL' bottom: 'c' top: 'd' }
         layer { name: 'clip' type: 'Clip' bottom: 'd' top: 'y' clip_param { min: 0.2 max: 1.1 } })",
      R"(layer { name: 'exp' type: 'Exp' bottom: 'x' top: 'a' exp_param { base: 2 scale: 0.5 shift: 0.1 } }
         layer { name: 'log' type: 'Log' bottom: 'a' top: 'b' log_param { base: 10 scale: 3 shift: 1 } }
         layer { name: 'e' type: 'Exp' bottom: 'b' top: 'c' }
         layer { name: 'l' type: 'Log' bottom: 'c' top: 'd' }
         layer { name: 'relu' type: 'ReLU' bottom: 'd' top: 'y' })",
      // A residual sum and its ReLU in place, then a gate over the run's input and a maximum with the other.
      R"(layer { name: 'sum' type: 'Eltwise' bottom: 'x' bottom: 'z' top: 'a' eltwise_param { coeff: 1 coeff: -0.5 } }
         layer { name: 'relu' type: 'ReLU' bottom: 'a' top: 'a' }
         layer { name: 'gate' type: 'Eltwise' bottom: 'x' bottom: 'a' top: 'b' eltwise_param { operation: PROD } }
         layer { name: 'max' type: 'Eltwise' bottom: 'b' bottom: 'z' bottom: 'x' top: 'c' eltwise_param { operation: MAX } }
         layer { name: 't' type: 'TanH' bottom: 'c' top: 'y' })",
      // Expression layers in a run: their formulas take the run's value and its inputs.
      R"(layer { name: 'g' type: 'Expression' bottom: 'x' bottom: 'z' top: 'a' expression_param { formula: 'x * sigmoid(z) - 0.25' } }
         layer { name: 't' type: 'TanH' bottom: 'a' top: 'b' }
         layer { name: 'e' type: 'Expression' bottom: 'b' bottom: 'x' top: 'c' expression_param { formula: '-b ^ 2 + `x` / 3' } }
         layer { name: 'p' type: 'Power' bottom: 'c' top: 'd' power_param { scale: 0.5 } }
         layer { name: 'q' type: 'Expression' bottom: 'd' top: 'y' expression_param { formula: 'where(d > 0, d, 0.1 * d)' } })",
  };
  for (const std::string& layers : runs) {
    SCOPED_TRACE(layers.substr(0, 60));
    const FusedRun plain = RunElements(layers, false), fused = RunElements(layers, true);
    // Five layers (and the Splits of blobs they read several times) in one.
    EXPECT_EQ(plain.types.size() - std::count(plain.types.begin(), plain.types.end(), "Split"), 6u);
    EXPECT_EQ(fused.types, (std::vector<std::string>{"Input", "Expression"}));
    ASSERT_EQ(fused.y.size(), plain.y.size());
    for (size_t i = 0; i < plain.y.size(); ++i) {
      EXPECT_NEAR(fused.y[i], plain.y[i], 2e-6 * std::max(1.f, std::fabs(plain.y[i]))) << i;
      EXPECT_NEAR(fused.dx[i], plain.dx[i], 1e-5 * std::max(1.f, std::fabs(plain.dx[i]))) << i;
      EXPECT_NEAR(fused.dz[i], plain.dz[i], 1e-5 * std::max(1.f, std::fabs(plain.dz[i]))) << i;
    }
  }
}

// What the pass leaves alone: a run of one, a layer whose top has another reader (the run stops there), a run in
// place on its input from its first layer, a loss weight, a forced engine; and nothing without fuse_elements.
TEST(FuseElementsTest, ThePassLeavesAloneWhatItMustNot) {
  const auto types = [](const std::string& layers, bool fuse = true) {
    NetParameter param = test::ParseNet(
        "force_backward: true layer { name: 'data' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } } }" +
        layers);
    param.set_fuse_elements(fuse);
    std::string joined;
    const NetParameter fused = FuseElementLayers(param);
    for (const LayerParameter& layer : fused.layer()) joined += layer.type() + " ";
    return joined;
  };
  const std::string chain = R"(
      layer { name: 'a' type: 'Sigmoid' bottom: 'x' top: 'a' }
      layer { name: 'b' type: 'TanH' bottom: 'a' top: 'b' })";
  EXPECT_EQ(types(chain), "Input Expression ");
  EXPECT_EQ(types(chain, false), "Input Sigmoid TanH ");
  EXPECT_EQ(types("layer { name: 'a' type: 'Sigmoid' bottom: 'x' top: 'a' }"), "Input Sigmoid ");
  EXPECT_EQ(types(chain + "layer { name: 'c' type: 'AbsVal' bottom: 'a' top: 'c' }"), "Input Sigmoid TanH AbsVal ");
  EXPECT_EQ(types(R"(layer { name: 'a' type: 'Sigmoid' bottom: 'x' top: 'x' }
                     layer { name: 'b' type: 'TanH' bottom: 'x' top: 'x' })"),
            "Input Sigmoid TanH ");
  EXPECT_EQ(types(R"(layer { name: 'a' type: 'Sigmoid' bottom: 'x' top: 'a' loss_weight: 1 }
                     layer { name: 'b' type: 'TanH' bottom: 'a' top: 'b' })"),
            "Input Sigmoid TanH ");
  EXPECT_EQ(types(R"(layer { name: 'a' type: 'ReLU' bottom: 'x' top: 'a' relu_param { engine: CAFFE } }
                     layer { name: 'b' type: 'TanH' bottom: 'a' top: 'b' })"),
            "Input ReLU TanH ");
  // An Eltwise joins a run (at its start, or reading the run's value and blobs from before it), not one whose other
  // bottom the run overwrote, nor one with a coefficient per bottom missing.
  EXPECT_EQ(types("layer { name: 'e' type: 'Eltwise' bottom: 'x' bottom: 'x' top: 'a' }"
                  "layer { name: 'r' type: 'ReLU' bottom: 'a' top: 'a' }"),
            "Input Expression ");
  EXPECT_EQ(types(chain + "layer { name: 'e' type: 'Eltwise' bottom: 'b' bottom: 'x' top: 'c' }"), "Input Expression ");
  EXPECT_EQ(types(R"(layer { name: 'a' type: 'Sigmoid' bottom: 'x' top: 'a' }
                     layer { name: 'b' type: 'TanH' bottom: 'a' top: 'a' }
                     layer { name: 'e' type: 'Eltwise' bottom: 'a' bottom: 'x' top: 'c' })"),
            "Input Expression ");
  EXPECT_EQ(types(chain + "layer { name: 'm' type: 'Expression' bottom: 'b' top: 'c' "
                          "expression_param { formula: 'b - mean(b)' } }"),
            "Input Expression Expression ");
  EXPECT_EQ(types("layer { name: 'e' type: 'Eltwise' bottom: 'x' bottom: 'x' top: 'a' eltwise_param { coeff: 2 } }"
                  "layer { name: 'r' type: 'ReLU' bottom: 'a' top: 'a' }"),
            "Input Eltwise ReLU ");
  // The fused layer: named after the layers, reading the run's input as x, writing its last top.
  NetParameter param =
      test::ParseNet("layer { name: 'data' type: 'Input' top: 'x' input_param { shape { dim: 2 } } }" + chain);
  param.set_fuse_elements(true);
  const NetParameter result = FuseElementLayers(param);
  const LayerParameter& fused = result.layer(1);
  EXPECT_EQ(fused.name(), "a+b");
  EXPECT_EQ(fused.bottom(0), "x");
  EXPECT_EQ(fused.top(0), "b");
  EXPECT_EQ(fused.expression_param().formula(0), "tanh(sigmoid(x))");
}

TEST(ExpressionLayerTest, ErrorsNameTheLayerTheFormulaAndTheColumn) {
  const auto error = [](const std::vector<std::string>& bottoms, const std::vector<std::string>& formulas,
                        const std::vector<std::vector<int>>& shapes, const std::vector<std::string>& parts) {
    SCOPED_TRACE(formulas.empty() ? "" : formulas[0]);
    test::BlobList bottom, top;
    for (const auto& shape : shapes) bottom.Add(shape);
    LayerParameter param = ExpressionParam(bottoms, formulas);
    // Two formulas stand for a mismatch: one top only.
    if (formulas.size() == 2) param.mutable_top()->RemoveLast();
    for (int k = 0; k < param.top_size(); ++k) top.Add({});
    ExpressionLayer layer(param);
    test::ExpectErrorContaining([&] { layer.SetUp(bottom.pointers, top.pointers); }, parts);
  };
  error({"x"}, {"x * sigmod(x)"}, {{3}}, {"'expr'", "formula 0", "column 5", "unknown function 'sigmod'", "sigmoid"});
  error({"x"}, {"x + y"}, {{3}}, {"column 5", "unknown name 'y'", "the inputs: x"});
  error({"x"}, {"pow(x)"}, {{3}}, {"column 1", "pow takes 2 arguments, got 1"});
  error({"x"}, {"(x + 1"}, {{3}}, {"column 7", "expected ')'"});
  error({"x"}, {"x 2"}, {{3}}, {"column 3", "unexpected '2'"});
  error({"x"}, {"x - mean[q](x)"}, {{3}}, {"column 10", "unknown axis 'q'", "the axes: n"});
  error({"x"}, {"max[n](x, x)"}, {{3}}, {"column 1", "max[...] takes 1 argument, got 2"});
  error({"x"}, {"exp[n](x)"}, {{3}}, {"column 4", "only sum, mean, max and min take axes"});
  error({"x"}, {"sum[](x)"}, {{3}}, {"sum[] names no axis"});
  error({"x"}, {"x", "x"}, {{3}}, {"2 formulas for 1 top"});
  error({"x", "z"}, {"x * z"}, {{2, 3}, {3, 2}},
        {"bottom 'z' has shape (3, 2)", "not the size of some of the axes", "bottom_axes"});
  error({"x", "z"}, {"x * z"}, {{2, 3, 3}, {3}}, {"bottom 'z'", "may vary over the axes c or h", "bottom_axes"});
  // Nesting is bounded (the parser recurses), long chains of operators are not.
  error({"x"}, {std::string(300, '(') + "x" + std::string(300, ')')}, {{3}}, {"more than 200 nested"});
  test::BlobList bottom, top;
  bottom.Add({3});
  top.Add({});
  std::string chain = "x";
  for (int k = 0; k < 5000; ++k) chain += k % 2 ? " + x" : " * -x";
  ExpressionLayer long_chain(ExpressionParam({"x"}, {chain + " ^ 1 ^ 1 ^ 1"}));
  EXPECT_NO_THROW(long_chain.SetUp(bottom.pointers, top.pointers));
}

}  // namespace
}  // namespace crema
