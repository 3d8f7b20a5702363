// One conformance harness for the GPU (after ggml's test-backend-ops): every case below runs forward and
// backward on random inputs, once on the CPU (the engine a CPU net would choose: the reference) and once on the
// GPU with each GPU engine of its type in turn (cuDNN's, the CUDA kernels), and every top, bottom gradient and
// parameter gradient must agree within the case's tolerance. A type without a GPU engine runs on the host of a
// GPU net (LayerRegistry's fallback), and its cases check that path instead.
//
// Adding a layer or an engine is one line in Cases(): a layer's text, its bottoms, and a tolerance when the
// default does not fit. A host test (it runs everywhere) fails when a type with a GPU engine has no line, so no
// GPU engine goes unchecked. The GPU tests skip with a message where no device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "core/random.hpp"
#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// What a bottom holds: Gaussian values, positive values (Log, stochastic pooling), or class labels in
// [0, classes).
struct Bottom {
  std::vector<int> shape;
  int classes = 0;  // > 0: labels
  bool positive = false;
};
Bottom Values(std::vector<int> shape) { return {std::move(shape)}; }
Bottom Positive(std::vector<int> shape) { return {std::move(shape), 0, true}; }
Bottom Labels(std::vector<int> shape, int classes) { return {std::move(shape), classes}; }

struct Case {
  std::string layer;  // the layer's text without name and blob names; `type` first
  std::vector<Bottom> bottoms;
  float tolerance = 1e-4f;  // relative, with an absolute floor of the same size
  int tops = 1;
  bool backward = true;  // false for layers without a gradient (Threshold, Accuracy)
};

// Filler text for learned parameters: random, so that every weight and bias matters.
#define RANDOM_FILLERS "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }"

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // Vision
      {"type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 " RANDOM_FILLERS " }",
       {Values({2, 3, 7, 6})}},
      {"type: 'Convolution' convolution_param { num_output: 6 kernel_size: 3 pad: 1 stride: 2 group: 3 " RANDOM_FILLERS
       " }",
       {Values({2, 3, 9, 8})}},
      {"type: 'Convolution' convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 dilation: 2 pad: "
       "2 " RANDOM_FILLERS " }",
       {Values({1, 2, 8, 9})}},
      {"type: 'Convolution' convolution_param { num_output: 5 kernel_size: 1 " RANDOM_FILLERS " }",
       {Values({3, 4, 5, 5})}},
      {"type: 'Convolution' convolution_param { num_output: 3 kernel_size: 2 kernel_size: 3 kernel_size: "
       "2 " RANDOM_FILLERS " }",
       {Values({2, 2, 4, 5, 4})}},
      {"type: 'Deconvolution' convolution_param { num_output: 3 kernel_size: 4 stride: 2 pad: 1 " RANDOM_FILLERS " }",
       {Values({2, 4, 5, 5})}},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }", {Values({2, 3, 9, 8})}},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", {Values({2, 3, 8, 8})}, 1e-4f, 2},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }", {Values({2, 4, 6, 6})}},
      {"type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }", {Values({2, 3, 9, 8})}},
      {"type: 'Pooling' pooling_param { pool: AVE global_pooling: true }", {Values({2, 5, 4, 6})}},
      {"type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 } phase: TEST",
       {Positive({2, 3, 6, 6})}},
      {"type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 }", {Values({2, 5, 4, 4})}},
      // -- more vision cases (issue 13) --
      // Neurons
      {"type: 'ReLU'", {Values({2, 3, 4, 5})}},
      {"type: 'ReLU' relu_param { negative_slope: 0.1 }", {Values({2, 3, 4, 5})}},
      {"type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }", {Values({4, 50})}},
      {"type: 'Dropout' phase: TEST", {Values({4, 50})}},
      {"type: 'Sigmoid'", {Values({3, 40})}},
      {"type: 'TanH'", {Values({3, 40})}},
      {"type: 'ELU' elu_param { alpha: 0.7 }", {Values({3, 40})}},
      {"type: 'AbsVal'", {Values({3, 40})}},
      {"type: 'BNLL'", {Values({3, 40})}},
      {"type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }", {Values({3, 40})}},
      {"type: 'Exp' exp_param { base: 2 scale: 0.5 }", {Values({3, 40})}},
      {"type: 'Log' log_param { scale: 2 shift: 1 }", {Positive({3, 40})}},
      {"type: 'Threshold' threshold_param { threshold: 0.2 }", {Values({3, 40})}, 1e-4f, 1, false},
      {"type: 'Clip' clip_param { min: -0.5 max: 0.7 }", {Values({3, 40})}},
      {"type: 'Swish' swish_param { beta: 1.5 }", {Values({3, 40})}},
      {"type: 'PReLU'", {Values({2, 3, 4, 4})}},
      // Common
      {"type: 'InnerProduct' inner_product_param { num_output: 7 " RANDOM_FILLERS " }", {Values({4, 3, 2, 5})}},
      {"type: 'InnerProduct' inner_product_param { num_output: 5 transpose: true axis: 2 " RANDOM_FILLERS " }",
       {Values({2, 3, 6})}},
      {"type: 'InnerProduct' inner_product_param { num_output: 4 bias_term: false " RANDOM_FILLERS " }",
       {Values({3, 10})}},
      {"type: 'Flatten'", {Values({2, 3, 4, 5})}},
      {"type: 'Split'", {Values({2, 3, 4})}, 1e-4f, 3},
      {"type: 'Softmax'", {Values({4, 10})}},
      {"type: 'Softmax' softmax_param { axis: 1 }", {Values({2, 5, 3, 4})}},
      {"type: 'Softmax' softmax_param { axis: -1 }", {Values({2, 3, 7})}},
      {"type: 'Concat'", {Values({2, 3, 4}), Values({2, 5, 4})}},
      {"type: 'Eltwise' eltwise_param { operation: SUM coeff: 0.5 coeff: -2 }", {Values({2, 3, 4}), Values({2, 3, 4})}},
      {"type: 'BatchNorm' phase: TRAIN", {Values({4, 3, 2, 2})}, 1e-3f},
      {"type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }",
       {Values({2, 3, 4})}},
      // -- more common cases (issue 13) --
      // Losses and metrics
      {"type: 'SoftmaxWithLoss'", {Values({6, 5}), Labels({6}, 5)}},
      {"type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 normalization: VALID }",
       {Values({2, 4, 3, 3}), Labels({2, 3, 3}, 4)}},
      {"type: 'SoftmaxWithLoss' loss_param { normalization: BATCH_SIZE } softmax_param { axis: 2 }",
       {Values({2, 3, 6}), Labels({2, 3}, 6)},
       1e-4f,
       2},
      {"type: 'EuclideanLoss'", {Values({4, 6}), Values({4, 6})}},
      {"type: 'Accuracy'", {Values({20, 7}), Labels({20}, 7)}, 1e-4f, 1, false},
      {"type: 'Accuracy' accuracy_param { top_k: 3 ignore_label: 1 }",
       {Values({30, 6}), Labels({30}, 6)},
       1e-4f,
       2,
       false},
      {"type: 'Accuracy' accuracy_param { axis: 1 }", {Values({2, 5, 3, 3}), Labels({2, 3, 3}, 5)}, 1e-4f, 1, false},
      // -- more loss and recurrent cases (issue 13) --
      // -- cuDNN engine cases (issue 13) --
  };
  return cases;
}

// Types with a GPU engine that no case above covers, and why: they read files or the Python interpreter; the
// GPU training tests run Data and Input.
const std::set<std::string> kNotHere = {"Data",       "ImageData",  "WindowData", "HDF5Data",
                                        "HDF5Output", "MemoryData", "Input",      "Python"};

std::string TypeOf(const Case& c) { return test::ParseLayer(c.layer).type(); }

// Everything a run produced, in a fixed order: tops, then bottom gradients, then parameter gradients.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  void Add(const std::string& name, std::vector<float> v) {
    names.push_back(name);
    values.push_back(std::move(v));
  }
};

// Runs one case on `device` with `engine` forced ("" = the device's own choice); `engine_run` says which
// engine the registry gave. `gpu_code_on_host` rehearses the engine's GPU code on a CPU context.
Outputs RunCase(const Case& c, Device device, const std::string& engine, std::string* engine_run,
                bool gpu_code_on_host = false) {
  auto context = std::make_shared<Context>(device, 0);
  context->set_gpu_code_on_host(gpu_code_on_host);
  LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
  if (!engine.empty()) context->force_engine(param.type(), engine);
  test::BlobList bottom, top;
  std::vector<std::vector<int>> shapes;
  std::vector<bool> propagate_down;
  for (size_t b = 0; b < c.bottoms.size(); ++b) {
    const Bottom& spec = c.bottoms[b];
    param.add_bottom("in" + std::to_string(b));
    shapes.push_back(spec.shape);
    Blob* blob = bottom.Add(spec.shape);
    RandomStream random(100 + b);
    float* data = blob->mutable_cpu_data();
    for (int i = 0; i < blob->count(); ++i) {
      data[i] = spec.classes > 0 ? static_cast<float>(random.UniformInt(spec.classes))
                : spec.positive  ? random.Uniform(0.1f, 2.f)
                                 : random.Gaussian(0.f, 1.f);
    }
    propagate_down.push_back(spec.classes == 0);
  }
  for (int t = 0; t < c.tops; ++t) {
    param.add_top("out" + std::to_string(t));
    top.Add({});
  }
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
  *engine_run = layer->engine() + (layer->device() == device ? "" : " (on the host)");
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  // Random top gradients (a loss top keeps the loss weight Forward gave it); parameter gradients start at 0.
  for (int t = 0; t < c.tops; ++t) {
    if (layer->loss(t) != 0.f) continue;
    RandomStream random(200 + t);
    float* diff = top.pointers[t]->mutable_cpu_diff();
    for (int i = 0; i < top.pointers[t]->count(); ++i) diff[i] = random.Gaussian(0.f, 1.f);
  }
  for (auto& blob : layer->blobs()) blob->set_diff(0.f);
  const bool backward = c.backward;
  if (backward) layer->Backward(top.pointers, propagate_down, bottom.pointers);

  Outputs out;
  for (int t = 0; t < c.tops; ++t) out.Add("top " + std::to_string(t), test::DataOf(*top.pointers[t]));
  if (backward) {
    for (size_t b = 0; b < c.bottoms.size(); ++b)
      if (propagate_down[b]) out.Add("bottom " + std::to_string(b) + " gradient", test::DiffOf(*bottom.pointers[b]));
    for (size_t p = 0; p < layer->blobs().size(); ++p) {
      out.Add("parameter " + std::to_string(p), test::DataOf(*layer->blobs()[p]));
      out.Add("parameter " + std::to_string(p) + " gradient", test::DiffOf(*layer->blobs()[p]));
    }
  }
  return out;
}

// The largest relative difference of two runs, and where it was.
std::string Compare(const Outputs& expected, const Outputs& actual, float tolerance) {
  if (expected.names != actual.names) return "the runs produced different outputs";
  for (size_t k = 0; k < expected.values.size(); ++k) {
    const std::vector<float>& e = expected.values[k];
    const std::vector<float>& a = actual.values[k];
    if (e.size() != a.size()) return expected.names[k] + ": sizes differ";
    for (size_t i = 0; i < e.size(); ++i) {
      const float allowed = tolerance * std::max(1.f, std::fabs(e[i]));
      if (!(std::fabs(e[i] - a[i]) <= allowed))
        return expected.names[k] + "[" + std::to_string(i) + "]: CPU " + std::to_string(e[i]) + ", GPU " +
               std::to_string(a[i]);
    }
  }
  return "";
}

// Runs everywhere: a GPU engine must come with a case.
TEST(GpuConformanceTest, EveryTypeWithAGpuEngineHasACase) {
  std::set<std::string> covered;
  for (const Case& c : Cases()) covered.insert(TypeOf(c));
  for (const std::string& type : LayerRegistry::Global().Types()) {
    if (LayerRegistry::Global().Engines(type, Device::kGPU).empty() || kNotHere.count(type)) continue;
    EXPECT_TRUE(covered.count(type)) << type << " has a GPU engine but no case in test_gpu_conformance.cpp";
  }
}

// Runs everywhere: every case is a valid layer on the CPU (so a GPU session never meets a broken line).
TEST(GpuConformanceTest, EveryCaseRunsOnTheCpu) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.layer);
    std::string engine;
    const Outputs first = RunCase(c, Device::kCPU, "", &engine);
    const Outputs again = RunCase(c, Device::kCPU, "", &engine);
    EXPECT_EQ(Compare(first, again, 0.f), "");
  }
}

// Runs everywhere: the GPU code of every engine that runs on both devices (its Forward_gpu / Backward_gpu, the
// rules and the context's math), rehearsed on the host (Context::set_gpu_code_on_host), matches the CPU code.
// This checks the logic of GPU code on machines without a GPU; EveryGpuEngineMatchesTheCpu then checks it on one.
TEST(GpuConformanceTest, GpuCodeRehearsedOnTheHostMatchesTheCpu) {
  int failures = 0, runs = 0;
  for (const Case& c : Cases()) {
    const std::string type = TypeOf(c);
    std::string reference_engine;
    const Outputs expected = RunCase(c, Device::kCPU, "", &reference_engine);
    const std::vector<std::string> on_cpu = LayerRegistry::Global().Engines(type, Device::kCPU);
    for (const std::string& engine : LayerRegistry::Global().Engines(type, Device::kGPU)) {
      // GPU-only engines (cuDNN's) need a device.
      if (std::find(on_cpu.begin(), on_cpu.end(), engine) == on_cpu.end()) continue;
      LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
      std::vector<std::vector<int>> shapes;
      for (const Bottom& b : c.bottoms) shapes.push_back(b.shape);
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kGPU}).empty()) continue;
      std::string engine_run, problem;
      try {
        problem = Compare(expected, RunCase(c, Device::kCPU, engine, &engine_run, true), c.tolerance);
      } catch (const Error& error) {
        problem = error.what();
      }
      ++runs;
      if (!problem.empty()) {
        ++failures;
        ADD_FAILURE() << c.layer << ": the GPU code of engine '" << engine << "' on the host (CPU: " << reference_engine
                      << "): " << problem;
      }
    }
  }
  std::printf("  %d rehearsals, %d failed\n", runs, failures);
  EXPECT_GT(runs, 0);
}

// One line per case and engine: the outcome, then every failure.
TEST(GpuConformanceTest, EveryGpuEngineMatchesTheCpu) {
  CREMA_SKIP_WITHOUT_GPU();
  int failures = 0, runs = 0;
  for (const Case& c : Cases()) {
    std::string reference_engine;
    const Outputs expected = RunCase(c, Device::kCPU, "", &reference_engine);
    // Each GPU engine forced in turn, then the net's own choice ("": the first that accepts, or the host
    // fallback where none does).
    std::vector<std::string> engines = LayerRegistry::Global().Engines(TypeOf(c), Device::kGPU);
    engines.push_back("");
    for (const std::string& engine : engines) {
      std::string engine_run, problem;
      try {
        problem = Compare(expected, RunCase(c, Device::kGPU, engine, &engine_run), c.tolerance);
      } catch (const Error& error) {
        // A forced engine that refuses this case says so; that is not a failure of the engine.
        const std::string what = error.what();
        if (what.find("cannot run it") != std::string::npos) {
          std::printf("  %-60.60s %-18s refused\n", c.layer.c_str(), engine.c_str());
          continue;
        }
        problem = what;
      }
      ++runs;
      std::printf("  %-60.60s %-18s %s\n", c.layer.c_str(), engine_run.c_str(), problem.empty() ? "OK" : "FAIL");
      if (!problem.empty()) {
        ++failures;
        ADD_FAILURE() << c.layer << " on engine '" << engine_run << "' (CPU: " << reference_engine << "): " << problem;
      }
    }
  }
  std::printf("  %d runs, %d failed\n", runs, failures);
}

// The numeric gradient check, run on the GPU, for the layers with learned parameters and the loss.
TEST(GpuConformanceTest, GradientsOnTheGpuMatchNumericOnes) {
  CREMA_SKIP_WITHOUT_GPU();
  for (const Case& c : Cases()) {
    const std::string type = TypeOf(c);
    if (type != "Convolution" && type != "InnerProduct" && type != "Deconvolution" && type != "SoftmaxWithLoss" &&
        type != "Pooling")
      continue;
    if (c.layer.find("STOCHASTIC") != std::string::npos) continue;
    SCOPED_TRACE(c.layer);
    auto context = std::make_shared<Context>(Device::kGPU, 0);
    LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
    test::BlobList bottom, top;
    std::vector<std::vector<int>> shapes;
    int labels = -1;
    for (size_t b = 0; b < c.bottoms.size(); ++b) {
      shapes.push_back(c.bottoms[b].shape);
      Blob* blob = bottom.Add(c.bottoms[b].shape);
      if (c.bottoms[b].classes > 0) {
        labels = static_cast<int>(b);
        RandomStream random(5);
        for (int i = 0; i < blob->count(); ++i)
          blob->mutable_cpu_data()[i] = static_cast<float>(random.UniformInt(c.bottoms[b].classes));
      } else {
        test::FillGaussian(blob, 0.f, 1.f, 6 + b);
      }
    }
    for (int t = 0; t < c.tops; ++t) top.Add({});
    std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
    layer->SetUp(bottom.pointers, top.pointers);
    // Max pooling's argmax is a kink: steps that change it are skipped by the checker's kink rule only for
    // ReLU-like layers, so pooling's check uses small steps.
    test::GradientChecker checker(type == "Pooling" ? 1e-3f : 1e-2f, 2e-3f);
    checker.CheckGradient(layer.get(), bottom.pointers, top.pointers, labels >= 0 ? 0 : -1);
  }
}

}  // namespace
}  // namespace crema
