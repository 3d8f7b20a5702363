// The cuDNN adapter and engines. On every machine: the context's deterministic mode and workspace limit (and their
// environment variables); in builds with cuDNN, also the engines' places in the registry, their refusals, the
// algorithm policy and cache, the adapter's status check, the BatchNorm engine's rules. With a GPU: each cuDNN engine
// (Convolution, Deconvolution, Pooling, Softmax, ReLU, Sigmoid, TanH, LRN, BatchNorm) against a CPU engine on random
// inputs of several shapes, forward and backward (bottom and parameter gradients; BatchNorm's running statistics),
// in place where the layer allows it, the gradient checker on the GPU, deterministic mode, the workspace limit, and a
// net of cuDNN layers against the same net on the CPU. GPU tests skip where no device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/context.hpp"
#include "core/random.hpp"
#include "layers/layer_registry.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

#ifdef CREMA_USE_CUDNN
#include "core/cudnn.hpp"
#include "layers/common/cudnn_softmax.hpp"
#include "layers/neuron/cudnn_activation.hpp"
#include "layers/neuron/cudnn_relu.hpp"
#include "layers/normalization/cudnn_batch_norm.hpp"
#include "layers/normalization/cudnn_lrn.hpp"
#include "layers/vision/cudnn_convolution.hpp"
#include "layers/vision/cudnn_pooling.hpp"
#endif

namespace crema {
namespace {

// Sets (or, with nullptr, removes) an environment variable for the life of the object.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr)
      unsetenv(name);
    else
      setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(CudnnContextTest, DeterminismAndWorkspaceLimitDefaultToOffAnd512MiB) {
  ScopedEnvironment deterministic("CREMA_DETERMINISTIC", nullptr), limit("CREMA_CUDNN_WORKSPACE_LIMIT_MB", nullptr);
  Context context;
  EXPECT_FALSE(context.deterministic());
  EXPECT_EQ(context.cudnn_workspace_limit(), size_t{512} << 20);
  context.set_deterministic(true);
  context.set_cudnn_workspace_limit(1000);
  EXPECT_TRUE(context.deterministic());
  EXPECT_EQ(context.cudnn_workspace_limit(), 1000u);
}

TEST(CudnnContextTest, TheEnvironmentSetsTheDefaults) {
  {
    ScopedEnvironment deterministic("CREMA_DETERMINISTIC", "1"), limit("CREMA_CUDNN_WORKSPACE_LIMIT_MB", "64");
    Context context;
    EXPECT_TRUE(context.deterministic());
    EXPECT_EQ(context.cudnn_workspace_limit(), size_t{64} << 20);
  }
  {
    ScopedEnvironment deterministic("CREMA_DETERMINISTIC", "0"), limit("CREMA_CUDNN_WORKSPACE_LIMIT_MB", "0");
    Context context;
    EXPECT_FALSE(context.deterministic());
    EXPECT_EQ(context.cudnn_workspace_limit(), 0u);
  }
}

TEST(CudnnContextTest, MalformedSettingsNameTheVariable) {
  for (const char* bad : {"lots", "-1", "12MB", " 5"}) {
    ScopedEnvironment limit("CREMA_CUDNN_WORKSPACE_LIMIT_MB", bad);
    test::ExpectErrorContaining([] { Context context; }, {"CREMA_CUDNN_WORKSPACE_LIMIT_MB", bad});
  }
  ScopedEnvironment deterministic("CREMA_DETERMINISTIC", "yes");
  test::ExpectErrorContaining([] { Context context; }, {"CREMA_DETERMINISTIC", "yes"});
}

#ifdef CREMA_USE_CUDNN

// ---- host tests: registry, refusals, policy, cache ---------------------------------------------------------------

// A layer parameter of `type` with `body` (the rest of the prototxt) and `tops` tops.
LayerParameter Param(const std::string& type, const std::string& body, int tops = 1) {
  LayerParameter param = test::ParseLayer("name: 'l' type: '" + type + "' " + body);
  param.add_bottom("in");
  for (int t = 0; t < tops; ++t) param.add_top("out" + std::to_string(t));
  return param;
}

std::string ConvolutionRefusal(const std::string& type, const std::string& conv, const std::vector<int>& shape) {
  const LayerParameter param = Param(type, "convolution_param { " + conv + " }");
  const std::vector<std::vector<int>> shapes = {shape};
  return CudnnConvolutionLayer::Refusal(EngineQuery{param, shapes, Device::kGPU});
}

std::string PoolingRefusal(const std::string& pooling, const std::vector<int>& shape, int tops = 1) {
  const LayerParameter param = Param("Pooling", "pooling_param { " + pooling + " }", tops);
  const std::vector<std::vector<int>> shapes = {shape};
  return CudnnPoolingLayer::Refusal(EngineQuery{param, shapes, Device::kGPU});
}

const char* const kCudnnTypes[] = {"Convolution", "Deconvolution", "Pooling", "Softmax",  "ReLU",
                                   "Sigmoid",     "TanH",          "LRN",     "BatchNorm"};

// The registry takes, on a GPU, the first engine that runs there and accepts: cudnn, being first, wherever its
// refusal is empty. So the refusal tests below say what a GPU net picks.
TEST(CudnnRegistryTest, CudnnIsTheFirstEngineOfItsTypes) {
  for (const char* type : kCudnnTypes) {
    const std::vector<std::string> engines = LayerRegistry::Global().Engines(type);
    ASSERT_FALSE(engines.empty()) << type;
    EXPECT_EQ(engines.front(), "cudnn") << type;
  }
}

// A CPU net never gets a cuDNN engine, and forcing one there is a clear error.
TEST(CudnnRegistryTest, ACpuQueryNeverPicksCudnn) {
  const std::vector<std::pair<LayerParameter, std::vector<int>>> layers = {
      {Param("Convolution", "convolution_param { num_output: 2 kernel_size: 3 }"), {2, 3, 6, 6}},
      {Param("Deconvolution", "convolution_param { num_output: 2 kernel_size: 3 stride: 2 }"), {2, 3, 4, 4}},
      {Param("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }"), {2, 3, 6, 6}},
      {Param("Softmax", ""), {2, 5}},
      {Param("ReLU", ""), {2, 5}},
      {Param("Sigmoid", ""), {2, 5}},
      {Param("TanH", ""), {2, 5}},
      {Param("LRN", "lrn_param { local_size: 3 }"), {2, 5, 3, 3}},
      {Param("BatchNorm", ""), {4, 3, 2, 2}},
  };
  for (const auto& [param, shape] : layers) {
    SCOPED_TRACE(param.type());
    auto context = std::make_shared<Context>();
    EXPECT_NE(LayerRegistry::Global().Create(param, {shape}, context)->engine(), "cudnn");
    // Caffe's engine: CUDNN falls back to the default order on the CPU.
    LayerParameter asks_cudnn = param;
    if (param.type() == "Convolution" || param.type() == "Deconvolution")
      asks_cudnn.mutable_convolution_param()->set_engine(ConvolutionParameter::CUDNN);
    if (param.type() == "Pooling") asks_cudnn.mutable_pooling_param()->set_engine(PoolingParameter::CUDNN);
    if (param.type() == "Softmax") asks_cudnn.mutable_softmax_param()->set_engine(SoftmaxParameter::CUDNN);
    if (param.type() == "ReLU") asks_cudnn.mutable_relu_param()->set_engine(ReLUParameter::CUDNN);
    if (param.type() == "Sigmoid") asks_cudnn.mutable_sigmoid_param()->set_engine(SigmoidParameter::CUDNN);
    if (param.type() == "TanH") asks_cudnn.mutable_tanh_param()->set_engine(TanHParameter::CUDNN);
    if (param.type() == "LRN") asks_cudnn.mutable_lrn_param()->set_engine(LRNParameter::CUDNN);
    EXPECT_NE(LayerRegistry::Global().Create(asks_cudnn, {shape}, context)->engine(), "cudnn");
    context->force_engine(param.type(), "cudnn");
    test::ExpectErrorContaining([&] { LayerRegistry::Global().Create(param, {shape}, context); },
                                {"'cudnn'", "does not run on the CPU"});
  }
}

TEST(CudnnRefusalTest, ConvolutionTakes2dAnd3dOverAxisOne) {
  EXPECT_EQ(ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3 pad: 1", {2, 3, 8, 8}), "");
  EXPECT_EQ(ConvolutionRefusal("Convolution", "num_output: 6 kernel_size: 3 group: 3 dilation: 2", {2, 6, 9, 9}), "");
  EXPECT_EQ(
      ConvolutionRefusal("Convolution", "num_output: 4 kernel_h: 3 kernel_w: 1 stride_h: 2 stride_w: 1", {1, 3, 9, 5}),
      "");
  EXPECT_EQ(ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3", {2, 3, 5, 6, 7}), "");
  EXPECT_EQ(ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3 axis: -3", {2, 3, 8, 8}), "");
  EXPECT_EQ(ConvolutionRefusal("Deconvolution", "num_output: 4 kernel_size: 4 stride: 16", {2, 3, 8, 8}), "");
  EXPECT_EQ(ConvolutionRefusal("Deconvolution", "num_output: 4 kernel_size: 2 stride: 2", {1, 2, 3, 3, 3}), "");

  std::string why = ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3", {2, 3, 8});
  EXPECT_NE(why.find("2-d and 3-d"), std::string::npos) << why;
  why = ConvolutionRefusal("Deconvolution", "num_output: 4 kernel_size: 2", {1, 2, 3, 3, 3, 3});
  EXPECT_NE(why.find("deconvolutions"), std::string::npos) << why;
  why = ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3 axis: 2", {2, 2, 3, 8, 8});
  EXPECT_NE(why.find("axis 1"), std::string::npos) << why;
  // A channel axis out of range is the layer's own error, not a refusal.
  EXPECT_EQ(ConvolutionRefusal("Convolution", "num_output: 4 kernel_size: 3 axis: 7", {2, 3, 8, 8}), "");
}

TEST(CudnnRefusalTest, PoolingTakesOnlyWhatCudnnComputesAsCaffeDoes) {
  // Output sizes where ceil and floor agree, FLOOR mode, global pooling, padded windows.
  EXPECT_EQ(PoolingRefusal("pool: MAX kernel_size: 2 stride: 2", {2, 3, 8, 8}), "");
  EXPECT_EQ(PoolingRefusal("pool: AVE kernel_size: 3 stride: 2", {2, 3, 7, 9}), "");
  EXPECT_EQ(PoolingRefusal("pool: MAX kernel_size: 3 stride: 1 pad: 1", {2, 3, 5, 5}), "");
  EXPECT_EQ(PoolingRefusal("pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 3, 9, 9}), "");
  EXPECT_EQ(PoolingRefusal("pool: AVE global_pooling: true", {2, 3, 5, 7}), "");
  EXPECT_EQ(PoolingRefusal("pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 3, 8, 8}), "");
  EXPECT_EQ(PoolingRefusal("pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 2", {1, 1, 7, 6}), "");

  // Caffe's ceiling adds a last window that overhangs the input: 4 outputs where cuDNN has 3.
  std::string why = PoolingRefusal("pool: MAX kernel_size: 3 stride: 2", {2, 3, 8, 8});
  EXPECT_NE(why.find("round_mode"), std::string::npos) << why;
  EXPECT_NE(why.find("is 4"), std::string::npos) << why;
  EXPECT_NE(why.find("is 3"), std::string::npos) << why;
  why = PoolingRefusal("pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 3, 8, 8});
  EXPECT_NE(why.find("round_mode"), std::string::npos) << why;
  why = PoolingRefusal("pool: MAX kernel_size: 2 stride: 2", {2, 3, 8, 7});
  EXPECT_NE(why.find("width"), std::string::npos) << why;
  why = PoolingRefusal("pool: STOCHASTIC kernel_size: 2 stride: 2", {2, 3, 8, 8});
  EXPECT_NE(why.find("STOCHASTIC"), std::string::npos) << why;
  why = PoolingRefusal("pool: MAX kernel_size: 2 stride: 2", {2, 3, 8, 8}, 2);
  EXPECT_NE(why.find("mask"), std::string::npos) << why;
  // A window wider than the padded input: Caffe pools one clipped window, cuDNN none.
  why = PoolingRefusal("pool: MAX kernel_size: 5 stride: 2", {1, 1, 4, 4});
  EXPECT_NE(why.find("larger than the padded input"), std::string::npos) << why;
  // What the layer itself rejects is left to its own error.
  EXPECT_EQ(PoolingRefusal("pool: MAX kernel_size: 2 pad: 2", {2, 3, 8, 8}), "");
  EXPECT_EQ(PoolingRefusal("pool: MAX kernel_size: 2", {2, 8, 8}), "");
}

TEST(CudnnRefusalTest, ReLUTakesNoNegativeSlopeAndSoftmaxTakesEveryAxis) {
  const std::vector<std::vector<int>> shapes = {{2, 3, 4}};
  const LayerParameter plain = Param("ReLU", "");
  EXPECT_EQ(CudnnReLULayer::Refusal(EngineQuery{plain, shapes, Device::kGPU}), "");
  const LayerParameter leaky = Param("ReLU", "relu_param { negative_slope: 0.1 }");
  const std::string why = CudnnReLULayer::Refusal(EngineQuery{leaky, shapes, Device::kGPU});
  EXPECT_NE(why.find("leaky"), std::string::npos) << why;
  for (const char* axis : {"0", "1", "2", "-1"}) {
    const LayerParameter softmax = Param("Softmax", std::string("softmax_param { axis: ") + axis + " }");
    EXPECT_EQ(CudnnSoftmaxLayer::Refusal(EngineQuery{softmax, shapes, Device::kGPU}), "") << axis;
  }
}

// The registry's answer for engine cudnn of the layer of `type` and `body` on bottoms of `shape` on `device`.
std::string CudnnRefusal(const std::string& type, const std::string& body, const std::vector<int>& shape,
                         Device device = Device::kGPU) {
  const LayerParameter param = Param(type, body);
  const std::vector<std::vector<int>> shapes = {shape};
  return LayerRegistry::Global().Refusal("cudnn", EngineQuery{param, shapes, device});
}

// Expects `why` to be a refusal containing `part`.
void ExpectRefusal(const std::string& why, const std::string& part) {
  EXPECT_NE(why.find(part), std::string::npos) << "refusal: '" << why << "', expected '" << part << "' in it";
}

TEST(CudnnRefusalTest, LRNTakesAcrossChannelsWithinCudnnsBounds) {
  const std::vector<int> shape = {2, 20, 5, 5};
  EXPECT_EQ(CudnnRefusal("LRN", "", shape), "");
  EXPECT_EQ(CudnnRefusal("LRN", "lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 k: 2 }", shape), "");
  for (const char* size : {"1", "3", "15"})
    EXPECT_EQ(CudnnRefusal("LRN", std::string("lrn_param { local_size: ") + size + " }", shape), "") << size;
  EXPECT_EQ(CudnnRefusal("LRN", "lrn_param { k: 0.0001 beta: 0.02 alpha: -1 }", shape), "");
  ExpectRefusal(CudnnRefusal("LRN", "lrn_param { norm_region: WITHIN_CHANNEL }", shape), "across channels only");
  ExpectRefusal(CudnnRefusal("LRN", "lrn_param { local_size: 17 }", shape), "1 to 16");
  ExpectRefusal(CudnnRefusal("LRN", "lrn_param { k: 0 }", shape), "k >=");
  // The float nearest 1e-5 lies below cuDNN's bound, as it is handed to cuDNN.
  ExpectRefusal(CudnnRefusal("LRN", "lrn_param { k: 1e-5 }", shape), "k >=");
  ExpectRefusal(CudnnRefusal("LRN", "lrn_param { beta: 0.001 }", shape), "beta >=");
  // An even window is the layer's own error, not a refusal.
  EXPECT_EQ(CudnnRefusal("LRN", "lrn_param { local_size: 4 }", shape), "");
  // The registry answers for the device too: cuDNN's engines never run on the CPU.
  ExpectRefusal(CudnnRefusal("LRN", "", shape, Device::kCPU), "does not run on the CPU");
}

TEST(CudnnRefusalTest, BatchNormRefusesBatchStatisticsOfOneValuePerChannel) {
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN", {4, 3, 2, 2}), "");
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN", {2, 3}), "");
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN", {1, 3, 1, 2}), "");
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN", {5}), "");
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN", {0, 3, 2, 2}), "");
  EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN batch_norm_param { eps: 0 }", {4, 3}), "");
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{{1, 3}, {1, 3, 1, 1}, {1}}) {
    SCOPED_TRACE(ShapeString(shape));
    ExpectRefusal(CudnnRefusal("BatchNorm", "phase: TRAIN", shape), "one value per channel");
    ExpectRefusal(CudnnRefusal("BatchNorm", "phase: TEST batch_norm_param { use_global_stats: false }", shape),
                  "one value per channel");
    // The stored statistics need no variance of the batch.
    EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TEST", shape), "");
    EXPECT_EQ(CudnnRefusal("BatchNorm", "phase: TRAIN batch_norm_param { use_global_stats: true }", shape), "");
  }
}

TEST(CudnnRefusalTest, SigmoidAndTanHTakeEveryShape) {
  for (const char* type : {"Sigmoid", "TanH"}) {
    for (const std::vector<int>& shape : std::vector<std::vector<int>>{{7}, {2, 3}, {2, 3, 4, 5, 6}, {0, 4}})
      EXPECT_EQ(CudnnRefusal(type, "", shape), "") << type << " " << ShapeString(shape);
  }
}

// The policy: cuDNN's order, within the limit, deterministic where asked; nothing when nothing qualifies.
TEST(CudnnAlgorithmTest, ChoiceFallsDownTheRankingToWhatFits) {
  const cudnn::AlgorithmRanking ranking = {{5, 1000, false}, {2, 300, true}, {0, 0, true}, {1, 10, false}};
  const auto chosen = [&](size_t limit, bool deterministic) {
    const cudnn::AlgorithmCandidate* c = cudnn::ChooseAlgorithm(ranking, limit, deterministic);
    return c == nullptr ? -1 : c->algorithm;
  };
  EXPECT_EQ(chosen(1000, false), 5);
  EXPECT_EQ(chosen(999, false), 2);
  EXPECT_EQ(chosen(299, false), 0);
  EXPECT_EQ(chosen(0, false), 0);
  EXPECT_EQ(chosen(1000, true), 2);
  EXPECT_EQ(chosen(100, true), 0);
  const cudnn::AlgorithmRanking big = {{5, 1000, true}, {1, 500, false}};
  EXPECT_EQ(cudnn::ChooseAlgorithm(big, 400, false), nullptr);
  EXPECT_EQ(cudnn::ChooseAlgorithm(big, 800, true), nullptr);
  EXPECT_EQ(cudnn::ChooseAlgorithm({}, 1u << 30, false), nullptr);
}

cudnn::ConvolutionKey SomeKey() {
  cudnn::ConvolutionKey key;
  key.device = 0;
  key.input = {2, 3, 8, 8};
  key.filter = {4, 3, 3, 3};
  key.pad = {1, 1};
  key.stride = {1, 1};
  key.dilation = {1, 1};
  key.groups = 1;
  return key;
}

// Each field of the key tells shapes apart; the direction is part of the entry; an entry is ranked once.
TEST(CudnnAlgorithmTest, TheCacheRanksEachShapeAndDirectionOnce) {
  cudnn::AlgorithmCache cache;
  int ranked = 0;
  const auto rank = [&] {
    ++ranked;
    return cudnn::AlgorithmRanking{{ranked, 0, true}};
  };
  const cudnn::ConvolutionKey base = SomeKey();
  EXPECT_EQ(cache.Find(base, cudnn::Direction::kForward, false, rank)[0].algorithm, 1);
  EXPECT_EQ(cache.Find(base, cudnn::Direction::kForward, false, rank)[0].algorithm, 1);
  EXPECT_EQ(ranked, 1);
  EXPECT_EQ(cache.Find(base, cudnn::Direction::kBackwardData, false, rank)[0].algorithm, 2);
  EXPECT_EQ(cache.Find(base, cudnn::Direction::kBackwardFilter, false, rank)[0].algorithm, 3);
  std::vector<cudnn::ConvolutionKey> variants(8, base);
  variants[0].device = 1;
  variants[1].input[0] = 3;
  variants[2].filter[0] = 5;
  variants[3].pad = {0, 1};
  variants[4].stride = {2, 1};
  variants[5].dilation = {1, 2};
  variants[6].groups = 3;
  variants[7].data_type = CUDNN_DATA_HALF;
  for (const cudnn::ConvolutionKey& key : variants) {
    EXPECT_FALSE(key == base) << key.ToString();
    cache.Find(key, cudnn::Direction::kForward, false, rank);
  }
  EXPECT_EQ(ranked, 3 + 8);
  EXPECT_EQ(cache.size(), 3u + 8u);
  for (const cudnn::ConvolutionKey& key : variants) cache.Find(key, cudnn::Direction::kForward, false, rank);
  EXPECT_EQ(ranked, 3 + 8);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(base.ToString(),
            "GPU 0, input 2x3x8x8, filter 4x3x3x3, pad 1x1, stride 1x1, dilation 1x1, groups 1, float");
}

// A measured ranking (cudnnFind*) and the heuristics' (cudnnGet*_v7) of one shape and direction are two entries.
TEST(CudnnAlgorithmTest, MeasuredAndHeuristicRankingsAreKeptApart) {
  cudnn::AlgorithmCache cache;
  int ranked = 0;
  const auto rank = [&] {
    ++ranked;
    return cudnn::AlgorithmRanking{{ranked, 0, true}};
  };
  const cudnn::ConvolutionKey key = SomeKey();
  EXPECT_EQ(cache.Find(key, cudnn::Direction::kForward, false, rank)[0].algorithm, 1);
  EXPECT_EQ(cache.Find(key, cudnn::Direction::kForward, true, rank)[0].algorithm, 2);
  EXPECT_EQ(cache.Find(key, cudnn::Direction::kForward, false, rank)[0].algorithm, 1);
  EXPECT_EQ(cache.Find(key, cudnn::Direction::kForward, true, rank)[0].algorithm, 2);
  EXPECT_EQ(ranked, 2);
  EXPECT_EQ(cache.size(), 2u);
}

// The setting: measured by default, from CREMA_CUDNN_ALGORITHMS, from a solver's cudnn_algorithms; a wrong word is an
// error naming where it came from and the words there are.
TEST(CudnnAlgorithmTest, TheChoiceOfRankingComesFromTheEnvironmentOrTheSolver) {
  EXPECT_EQ(Context().cudnn_algorithms(), Context::CudnnAlgorithms::kMeasured);
  EXPECT_EQ(Context::ParseCudnnAlgorithms("heuristic", "x"), Context::CudnnAlgorithms::kHeuristic);
  EXPECT_EQ(Context::ParseCudnnAlgorithms("measured", "x"), Context::CudnnAlgorithms::kMeasured);
  try {
    Context::ParseCudnnAlgorithms("fastest", "--cudnn_algorithms");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--cudnn_algorithms='fastest': use measured"), std::string::npos)
        << error.what();
  }
  ::setenv("CREMA_CUDNN_ALGORITHMS", "heuristic", 1);
  EXPECT_EQ(Context().cudnn_algorithms(), Context::CudnnAlgorithms::kHeuristic);
  ::setenv("CREMA_CUDNN_ALGORITHMS", "quick", 1);
  EXPECT_THROW(Context(), Error);
  ::unsetenv("CREMA_CUDNN_ALGORITHMS");
  SolverParameter solver;
  solver.set_solver_mode(SolverParameter::CPU);
  EXPECT_EQ(Solver::ContextFor(solver)->cudnn_algorithms(), Context::CudnnAlgorithms::kMeasured);
  solver.set_cudnn_algorithms(SolverParameter::HEURISTIC);
  EXPECT_EQ(Solver::ContextFor(solver)->cudnn_algorithms(), Context::CudnnAlgorithms::kHeuristic);
}

TEST(CudnnAlgorithmTest, ThreadsSharingTheCacheRankAnEntryOnce) {
  cudnn::AlgorithmCache cache;
  std::atomic<int> ranked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        cudnn::ConvolutionKey key = SomeKey();
        key.input[0] = i % 10;
        const auto ranking = cache.Find(key, static_cast<cudnn::Direction>(t % 3), false, [&] {
          ++ranked;
          return cudnn::AlgorithmRanking{{i % 10, 0, true}};
        });
        EXPECT_EQ(ranking.size(), 1u);
        EXPECT_EQ(ranking[0].algorithm, i % 10);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ranked.load(), 30);  // 10 shapes x 3 directions
}

TEST(CudnnAdapterTest, AFailedCallIsAnErrorNamingTheCallAndTheStatus) {
  EXPECT_NO_THROW(cudnn::Check(CUDNN_STATUS_SUCCESS, "cudnnSomething()"));
  test::ExpectErrorContaining([] { cudnn::Check(CUDNN_STATUS_BAD_PARAM, "cudnnSetSomething(descriptor, 3)"); },
                              {"cuDNN call cudnnSetSomething(descriptor, 3) failed", "CUDNN_STATUS_BAD_PARAM"});
  EXPECT_GE(cudnn::Version(), 90000u);  // written against cuDNN 9's API
}

// Describing needs no device; an output shape that is not cuDNN's is an error naming both.
TEST(CudnnAdapterTest, APlanChecksCudnnsOutputShapeAgainstCaffes) {
  cudnn::ConvolutionPlan plan;
  cudnn::ConvolutionKey key = SomeKey();
  key.stride = {2, 2};
  EXPECT_NO_THROW(plan.Describe(key, {2, 4, 4, 4}, "layer 'c' (Convolution)"));
  const auto wrong = [&] { plan.Describe(key, {2, 4, 5, 5}, "layer 'c' (Convolution)"); };
  test::ExpectErrorContaining(wrong, {"layer 'c' (Convolution)", "cuDNN computes the output shape 2x4x4x4", "2x4x5x5"});
  cudnn::TensorDescriptor empty;
  test::ExpectErrorContaining([&] { empty.SetPacked({2, 0, 3}); }, {"empty tensor"});
}

// ---- host tests: the engines' shapes against cuDNN's own arithmetic -----------------------------------------------
// cuDNN's descriptors need no device: an engine sets up on the CPU (describing itself, checking cuDNN's output
// shape against Caffe's) and only refuses to run there.

// The top shapes of `param` on `shape` set up by `layer`, or {} when its set-up throws.
std::vector<int> TopShapeOf(Layer* layer, const std::vector<int>& shape, std::string* error = nullptr) {
  test::BlobList bottom, top;
  bottom.Add(shape);
  top.Add({});
  try {
    layer->SetUp(bottom.pointers, top.pointers);
  } catch (const Error& e) {
    if (error != nullptr) *error = e.what();
    return {};
  }
  return top.pointers[0]->shape();
}

// Every (de)convolution the native engine sets up, the cuDNN engine describes to cuDNN with Caffe's output shape
// (ConvolutionPlan::Describe checks cuDNN's arithmetic against it).
TEST(CudnnShapeTest, EveryConvolutionIsDescribedWithCaffesOutputShape) {
  int described = 0;
  for (const char* type : {"Convolution", "Deconvolution"}) {
    for (int axes : {2, 3}) {
      for (int in : {1, 4, 7}) {
        for (int kernel : {1, 2, 3}) {
          for (int pad : {0, 1, 2}) {
            for (int stride : {1, 3}) {
              for (int dilation : {1, 2}) {
                for (int group : {1, 2}) {
                  if (axes == 3 && (in == 7 || group == 2)) continue;  // fewer 3-d cases
                  std::vector<int> shape = {2, 2 * group};
                  for (int a = 0; a < axes; ++a) shape.push_back(in + a);
                  const std::string conv =
                      "num_output: " + std::to_string(2 * group) + " kernel_size: " + std::to_string(kernel) +
                      " pad: " + std::to_string(pad) + " stride: " + std::to_string(stride) +
                      " dilation: " + std::to_string(dilation) + " group: " + std::to_string(group);
                  SCOPED_TRACE(std::string(type) + " " + conv + " on " + ShapeString(shape));
                  const LayerParameter param = Param(type, "convolution_param { " + conv + " }");
                  auto native = test::CreateWithEngine(param, {shape}, "native");
                  const std::vector<int> expected = TopShapeOf(native.get(), shape);
                  if (expected.empty()) continue;  // the layer's own checks refuse it
                  // A kernel past the padded input by less than a stride (one output, as Caffe computes it)
                  // is declined, for the native and im2col_batched engines to serve; every other shape is cuDNN's.
                  const std::string refusal =
                      CudnnConvolutionLayer::Refusal(EngineQuery{param, {shape}, Device::kGPU});
                  if (!refusal.empty()) {
                    EXPECT_NE(refusal.find("reaches past the padded input"), std::string::npos) << refusal;
                    continue;
                  }
                  std::unique_ptr<Layer> cudnn;
                  if (std::string(type) == "Convolution")
                    cudnn = std::make_unique<CudnnConvolutionLayer>(param);
                  else
                    cudnn = std::make_unique<CudnnDeconvolutionLayer>(param);
                  std::string error;
                  EXPECT_EQ(TopShapeOf(cudnn.get(), shape, &error), expected) << error;
                  ++described;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(described, 200);
}

// Over a sweep of windows and input sizes: where the refusal accepts, cuDNN's own output size is Caffe's (the
// engine checks it when it sets up); where it refuses for the rounding, cuDNN's size is indeed another.
TEST(CudnnShapeTest, PoolingRefusesExactlyWhereCudnnsOutputSizeDiffers) {
  int accepted = 0, refused = 0;
  for (const char* round : {"CEIL", "FLOOR"}) {
    for (int in = 1; in <= 9; ++in) {
      for (int kernel = 1; kernel <= 4; ++kernel) {
        for (int pad = 0; pad < kernel; ++pad) {
          for (int stride = 1; stride <= 3; ++stride) {
            const std::string window = "kernel_size: " + std::to_string(kernel) + " pad: " + std::to_string(pad) +
                                       " stride: " + std::to_string(stride) + " round_mode: " + round;
            const std::vector<int> shape = {2, 3, in, in + 1};
            SCOPED_TRACE(window + " on " + ShapeString(shape));
            for (const char* method : {"MAX", "AVE"}) {
              const LayerParameter param =
                  Param("Pooling", std::string("pooling_param { pool: ") + method + " " + window + " }");
              auto native = test::CreateWithEngine(param, {shape}, "native");
              const std::vector<int> expected = TopShapeOf(native.get(), shape);
              if (expected.empty()) continue;  // the layer's own checks refuse it
              const std::string why = CudnnPoolingLayer::Refusal(EngineQuery{param, {shape}, Device::kGPU});
              if (why.empty()) {
                CudnnPoolingLayer cudnn(param);
                std::string error;
                EXPECT_EQ(TopShapeOf(&cudnn, shape, &error), expected) << error;
                ++accepted;
              } else if (why.find("round_mode") != std::string::npos) {
                cudnn::TensorDescriptor input;
                input.SetPacked(shape);
                cudnn::PoolingDescriptor pooling;
                pooling.Set2d(cudnn::PoolingMode::kMax, false, kernel, kernel, pad, pad, stride, stride);
                EXPECT_NE(pooling.OutputShape(input), expected) << why;
                ++refused;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 50);
  const LayerParameter global = Param("Pooling", "pooling_param { pool: AVE global_pooling: true }");
  CudnnPoolingLayer cudnn(global);
  EXPECT_EQ(TopShapeOf(&cudnn, {2, 3, 5, 7}), (std::vector<int>{2, 3, 1, 1}));
}

// Set up on the CPU, each engine refuses to run there, with a message saying why.
TEST(CudnnShapeTest, TheEnginesSetUpAnywhereButRunOnlyOnTheGpu) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<CudnnConvolutionLayer>(
      Param("Convolution", "convolution_param { num_output: 2 kernel_size: 3 }")));
  layers.push_back(std::make_unique<CudnnPoolingLayer>(Param("Pooling", "pooling_param { kernel_size: 2 stride: 2 }")));
  layers.push_back(std::make_unique<CudnnSoftmaxLayer>(Param("Softmax", "")));
  layers.push_back(std::make_unique<CudnnReLULayer>(Param("ReLU", "")));
  for (const auto& layer : layers) {
    SCOPED_TRACE(layer->type());
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 6, 6}));
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    EXPECT_EQ(layer->workspace_floats(), 0u);
    test::ExpectErrorContaining([&] { layer->Forward(bottom.pointers, top.pointers); }, {"'l'", "GPU only"});
  }
}

// The LRN, BatchNorm, Sigmoid and TanH engines set up on the host too, declaring the memory they will use on the GPU:
// LRN a workspace for backward's recomputed output; BatchNorm, with batch statistics, scratch for cuDNN's
// statistics and, in place, the normalized values it keeps (an internal blob, which a Scale in place after it may
// read: KeptTop) and a copy of the top's gradient (the workspace);
// Sigmoid and TanH nothing.
TEST(CudnnShapeTest, LRNBatchNormSigmoidAndTanHDeclareTheirMemoryAndRunOnlyOnTheGpu) {
  const auto set_up = [](Layer* layer, const std::vector<int>& shape, bool in_place) {
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(shape));
    Blob* out = in_place ? bottom.pointers[0] : top.Add({});
    layer->SetUp(bottom.pointers, {out});
    EXPECT_EQ(out->shape(), shape);
    test::ExpectErrorContaining([&] { layer->Forward(bottom.pointers, {out}); }, {"'l'", "GPU only"});
  };
  CudnnLRNLayer lrn(Param("LRN", "lrn_param { local_size: 3 }"));
  set_up(&lrn, {2, 5, 3, 3}, false);
  EXPECT_EQ(lrn.workspace_floats(), 90u);
  EXPECT_TRUE(lrn.internal_blobs().empty());

  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    CudnnBatchNormLayer train(Param("BatchNorm", "phase: TRAIN"));
    set_up(&train, {4, 3, 5, 5}, in_place);
    // 3 channels take one 64-float block each: zeros and cuDNN's running mean and variance; backward's two
    // parameter gradients, zeros and, in place, dy's copy.
    EXPECT_EQ(train.workspace_floats(), in_place ? 192u + 300u : 192u);
    EXPECT_EQ(train.internal_blob_names(), (std::vector<std::string>{"l.mean", "l.inv_std", "l.normalized"}));
    EXPECT_EQ(train.KeptTop(0), in_place ? train.internal_blobs()[2].get() : nullptr);
    EXPECT_EQ(train.internal_blobs()[0]->count(), 3);
    EXPECT_EQ(train.internal_blobs()[1]->count(), 3);
    EXPECT_EQ(train.internal_blobs()[2]->count(), in_place ? 300 : 0);
    EXPECT_EQ(train.params().size(), 3u);
    CudnnBatchNormLayer stored(Param("BatchNorm", "phase: TEST"));
    set_up(&stored, {4, 3, 5, 5}, in_place);
    EXPECT_EQ(stored.workspace_floats(), 0u);
    EXPECT_EQ(stored.internal_blobs()[2]->count(), 0);
    EXPECT_EQ(stored.KeptTop(0), nullptr);
  }
  // A shape the refusal never saw: the layer names it.
  CudnnBatchNormLayer one(Param("BatchNorm", "phase: TRAIN"));
  test::BlobList bottom, top;
  bottom.Add({1, 3, 1, 1});
  top.Add({});
  test::ExpectErrorContaining([&] { one.SetUp(bottom.pointers, top.pointers); },
                              {"'l'", "1 3 1 1", "one value per channel", "--engine=BatchNorm:native"});

  CudnnSigmoidLayer sigmoid(Param("Sigmoid", ""));
  set_up(&sigmoid, {2, 3, 4}, true);
  EXPECT_EQ(sigmoid.workspace_floats(), 0u);
  CudnnTanHLayer tanh(Param("TanH", ""));
  set_up(&tanh, {2, 3, 4}, false);
  EXPECT_EQ(tanh.workspace_floats(), 0u);
}

// The BatchNorm engine's rules, run on the host, give the native engine's numbers: the running sums after a batch
// (from the batch's mean and unbiased variance, what cuDNN's running averages hold with factor 1), and, with the
// stored statistics, the normalised values and the gradient.
TEST(CudnnBatchNormRulesTest, TheRulesGiveTheNativeEnginesNumbers) {
  const std::vector<int> shape = {4, 3, 2, 5};
  const int channels = 3, spatial = 10, m = 40;
  const std::vector<float> mean_sum = {0.3f, -0.2f, 1.f}, variance_sum = {2.f, 1.5f, 0.7f}, factor = {2.5f};
  const auto native_run = [&](const std::string& phase, test::BlobList* bottom, test::BlobList* top) {
    auto layer = test::CreateWithEngine(
        Param("BatchNorm", phase + " batch_norm_param { moving_average_fraction: 0.9 eps: 0.001 }"), {shape}, "native");
    test::FillGaussian(bottom->Add(shape), 0.5f, 2.f, 7);
    top->Add({});
    layer->SetUp(bottom->pointers, top->pointers);
    std::copy(mean_sum.begin(), mean_sum.end(), layer->params()[0]->mutable_cpu_data());
    std::copy(variance_sum.begin(), variance_sum.end(), layer->params()[1]->mutable_cpu_data());
    layer->params()[2]->mutable_cpu_data()[0] = factor[0];
    layer->Forward(bottom->pointers, top->pointers);
    return layer;
  };
  const auto expect_near = [](const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
    ASSERT_EQ(actual.size(), expected.size()) << what;
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5 * std::max(1.f, std::fabs(expected[i]))) << what << "[" << i << "]";
  };

  // Batch statistics.
  test::BlobList bottom, top;
  auto train = native_run("phase: TRAIN", &bottom, &top);
  const float* x = bottom.pointers[0]->cpu_data();
  std::vector<float> batch_mean(channels), batch_variance(channels);
  for (int c = 0; c < channels; ++c) {
    double sum = 0, sumsq = 0;
    for (int n = 0; n < shape[0]; ++n)
      for (int i = 0; i < spatial; ++i) sum += x[(n * channels + c) * spatial + i];
    const double mu = sum / m;
    for (int n = 0; n < shape[0]; ++n)
      for (int i = 0; i < spatial; ++i) sumsq += std::pow(x[(n * channels + c) * spatial + i] - mu, 2);
    batch_mean[c] = static_cast<float>(mu);
    batch_variance[c] = static_cast<float>(sumsq / (m - 1));  // unbiased, as cuDNN's running variance
  }
  std::vector<float> sums_mean = mean_sum, sums_variance = variance_sum, sums_factor = factor;
  for_each_element(channels, BatchNormUpdateRule{batch_mean.data(), batch_variance.data(), sums_mean.data(),
                                                 sums_variance.data(), sums_factor.data(), nullptr, 0.9f, 1.f, 0.001f});
  expect_near(sums_mean, test::DataOf(*train->params()[0]), "mean sum");
  expect_near(sums_variance, test::DataOf(*train->params()[1]), "variance sum");
  expect_near(sums_factor, test::DataOf(*train->params()[2]), "scale factor");

  // Stored statistics.
  test::BlobList test_bottom, test_top;
  auto global = native_run("phase: TEST", &test_bottom, &test_top);
  std::vector<float> mean(channels), inv_std(channels), y(test_bottom.pointers[0]->count());
  for_each_element(channels, BatchNormStoredRule{mean_sum.data(), variance_sum.data(), factor.data(), mean.data(),
                                                 inv_std.data(), 0.001f});
  for_each_element(
      static_cast<int>(y.size()),
      BatchNormNormalizeRuleOf<float, float>{
          {test_bottom.pointers[0]->cpu_data()}, mean.data(), inv_std.data(), y.data(), y.data(), channels, spatial});
  expect_near(y, test::DataOf(*test_top.pointers[0]), "top");
  Blob gradient(shape);
  test::FillGaussian(&gradient, 0.f, 1.f, 8);
  const std::vector<float> dy = test::DataOf(gradient);
  std::copy(dy.begin(), dy.end(), test_top.pointers[0]->mutable_cpu_diff());
  global->Backward(test_top.pointers, {true}, test_bottom.pointers);
  std::vector<float> dx(dy.size());
  for_each_element(static_cast<int>(dx.size()), BatchNormBackwardRule{dy.data(), nullptr, inv_std.data(), nullptr,
                                                                      nullptr, dx.data(), channels, spatial});
  expect_near(dx, test::DiffOf(*test_bottom.pointers[0]), "bottom gradient");
}

// ---- GPU tests: each engine against a CPU engine -----------------------------------------------------------------

// The values a run produced: each top's data, each bottom's gradient, each parameter's gradient.
struct Outcome {
  std::string engine;
  std::vector<std::vector<float>> tops, bottom_diffs, param_diffs;
};

// One forward and backward of the layer of `text` (one top per bottom) on bottoms of `shapes` (Gaussian, fixed
// seeds), its engine forced to `engine` on `device`, from Gaussian top gradients. The parameters start from the
// layer's fillers and are returned in *params when it is empty, else take its values; their gradients start at 0.
Outcome RunEngine(const std::string& text, const std::vector<std::vector<int>>& shapes, Device device,
                  const std::string& engine, std::vector<std::vector<float>>* params) {
  auto context = std::make_shared<Context>(device, 0);
  LayerParameter param = test::ParseLayer(text);
  for (size_t b = 0; b < shapes.size(); ++b) {
    param.add_bottom("in" + std::to_string(b));
    param.add_top("out" + std::to_string(b));
  }
  context->force_engine(param.type(), engine);
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
  Outcome outcome;
  outcome.engine = layer->engine();
  test::BlobList bottom, top;
  for (size_t b = 0; b < shapes.size(); ++b) {
    test::FillGaussian(bottom.Add(shapes[b]), 0.f, 1.f, 100 + b);
    top.Add({});
  }
  layer->SetUp(bottom.pointers, top.pointers);
  for (size_t i = 0; i < layer->params().size(); ++i) {
    Blob& blob = *layer->params()[i];
    if (params->size() <= i) {
      params->push_back(test::DataOf(blob));
    } else {
      std::copy((*params)[i].begin(), (*params)[i].end(), blob.mutable_cpu_data());
    }
    blob.set_diff(0.f);
  }
  layer->Forward(bottom.pointers, top.pointers);
  for (size_t t = 0; t < top.pointers.size(); ++t) {
    Blob gradient(top.pointers[t]->shape());
    test::FillGaussian(&gradient, 0.f, 1.f, 200 + t);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), top.pointers[t]->mutable_cpu_diff());
    outcome.tops.push_back(test::DataOf(*top.pointers[t]));
  }
  layer->Backward(top.pointers, std::vector<bool>(shapes.size(), true), bottom.pointers);
  for (Blob* blob : bottom.pointers) outcome.bottom_diffs.push_back(test::DiffOf(*blob));
  for (const auto& blob : layer->params()) outcome.param_diffs.push_back(test::DiffOf(*blob));
  return outcome;
}

// Expects `actual` within `relative` of `expected`'s largest magnitude (plus a floor for all-zero results): the
// engines sum in other orders, while a wrong index or a missed term is off by the size of the values.
void ExpectClose(const std::vector<std::vector<float>>& actual, const std::vector<std::vector<float>>& expected,
                 double relative, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t k = 0; k < actual.size(); ++k) {
    ASSERT_EQ(actual[k].size(), expected[k].size()) << what << " " << k;
    double scale = 0;
    for (float v : expected[k]) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const double tolerance = relative * scale + 1e-6;
    int wrong = 0;
    for (size_t i = 0; i < actual[k].size(); ++i) {
      if (std::fabs(actual[k][i] - expected[k][i]) > tolerance && ++wrong <= 5)
        ADD_FAILURE() << what << " " << k << "[" << i << "]: " << actual[k][i] << " vs " << expected[k][i]
                      << " (tolerance " << tolerance << ")";
    }
    EXPECT_EQ(wrong, 0) << what << " " << k << ": " << wrong << " of " << actual[k].size() << " values differ";
  }
}

// The cuDNN engine on the GPU against `cpu_engine` on the CPU, for the layer of `text` on `shapes`.
void ExpectCudnnMatchesTheCpu(const std::string& text, const std::vector<std::vector<int>>& shapes,
                              const std::string& cpu_engine, double relative) {
  SCOPED_TRACE(text);
  std::vector<std::vector<float>> params;
  const Outcome cpu = RunEngine(text, shapes, Device::kCPU, cpu_engine, &params);
  const Outcome gpu = RunEngine(text, shapes, Device::kGPU, "cudnn", &params);
  EXPECT_EQ(gpu.engine, "cudnn");
  ExpectClose(gpu.tops, cpu.tops, relative, "top");
  ExpectClose(gpu.bottom_diffs, cpu.bottom_diffs, relative, "bottom gradient");
  ExpectClose(gpu.param_diffs, cpu.param_diffs, relative, "parameter gradient");
}

const char* const kFillers = " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";

std::string ConvolutionText(const std::string& type, const std::string& conv) {
  return "name: 'c' type: '" + type + "' convolution_param { " + conv + kFillers + " }";
}

TEST(CudnnEngineTest, ConvolutionMatchesTheReferenceEngine) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<std::vector<int>>>> cases = {
      {"num_output: 4 kernel_size: 3 pad: 1", {{2, 3, 9, 9}}},
      {"num_output: 6 kernel_size: 3 stride: 2 group: 2", {{2, 4, 10, 8}}},
      {"num_output: 3 kernel_h: 5 kernel_w: 3 stride_h: 2 stride_w: 1 pad_h: 2 pad_w: 1", {{1, 3, 11, 7}}},
      {"num_output: 4 kernel_size: 3 dilation: 2 pad: 2", {{2, 2, 9, 9}}},
      {"num_output: 5 kernel_size: 1 bias_term: false", {{3, 8, 5, 5}}},
      {"num_output: 4 kernel_size: 3 group: 4 pad: 1", {{2, 4, 6, 6}}},
      {"num_output: 3 kernel_size: 3 pad: 1", {{2, 3, 6, 6}, {2, 3, 6, 6}}},
      {"num_output: 3 kernel_size: 3 pad: 1", {{2, 2, 5, 6, 7}}},
      {"num_output: 2 kernel_size: 2 stride: 2 pad: 1", {{1, 3, 5, 4, 6}}},
      {"num_output: 16 kernel_size: 5", {{4, 8, 16, 16}}},
  };
  for (const auto& [conv, shapes] : cases)
    ExpectCudnnMatchesTheCpu(ConvolutionText("Convolution", conv), shapes, "reference", 1e-4);
}

TEST(CudnnEngineTest, DeconvolutionMatchesTheNativeEngine) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<std::vector<int>>>> cases = {
      {"num_output: 4 kernel_size: 3 stride: 2 pad: 1", {{2, 3, 5, 5}}},
      {"num_output: 2 kernel_size: 4 stride: 2 pad: 1 group: 2", {{1, 4, 4, 4}}},
      {"num_output: 3 kernel_size: 1 bias_term: false", {{2, 2, 3, 3}}},
      {"num_output: 2 kernel_size: 2 stride: 2", {{1, 2, 3, 3, 3}}},
      {"num_output: 3 kernel_size: 3", {{2, 2, 4, 4}, {2, 2, 4, 4}}},
  };
  for (const auto& [conv, shapes] : cases)
    ExpectCudnnMatchesTheCpu(ConvolutionText("Deconvolution", conv), shapes, "native", 1e-4);
}

TEST(CudnnEngineTest, PoolingMatchesTheNativeEngine) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"kernel_size: 2 stride: 2", {2, 3, 8, 8}},
      {"kernel_size: 3 stride: 2", {2, 3, 7, 9}},
      // Padded windows over Gaussian values (negative ones at the borders): the maximum ignores the padding,
      // the average counts it.
      {"kernel_size: 3 stride: 1 pad: 1", {2, 2, 6, 6}},
      {"kernel_size: 3 stride: 2 pad: 1", {2, 2, 9, 9}},
      {"kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 2, 8, 8}},
      {"kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 2 pad_h: 1 pad_w: 0", {1, 3, 7, 6}},
      {"global_pooling: true", {2, 3, 5, 7}},
  };
  for (const char* method : {"MAX", "AVE"}) {
    for (const auto& [window, shape] : cases) {
      const std::string text =
          std::string("name: 'p' type: 'Pooling' pooling_param { pool: ") + method + " " + window + " }";
      ExpectCudnnMatchesTheCpu(text, {shape}, "native", 1e-5);
    }
  }
}

// Where a MAX window holds equal maxima, cuDNN's gradient may take another of them than the native engine's; it
// must still be a gradient of the maximum: each window's whole gradient on one position that holds the maximum.
TEST(CudnnEngineTest, MaxPoolingTiesSendEachWindowsGradientToOneMaximum) {
  CREMA_SKIP_WITHOUT_GPU();
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  LayerParameter param = Param("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }");
  auto layer = LayerRegistry::Global().Create(param, {{1, 2, 4, 4}}, context);
  ASSERT_EQ(layer->engine(), "cudnn");
  test::BlobList bottom, top;
  Blob* input = bottom.Add({1, 2, 4, 4});
  input->set_data(0.f);
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  top.pointers[0]->set_diff(1.f);
  layer->Backward(top.pointers, {true}, bottom.pointers);
  const std::vector<float> dx = test::DiffOf(*input);
  for (int plane = 0; plane < 2; ++plane) {
    for (int window = 0; window < 4; ++window) {
      const int h0 = window / 2 * 2, w0 = window % 2 * 2;
      float sum = 0;
      int touched = 0;
      for (int h = h0; h < h0 + 2; ++h) {
        for (int w = w0; w < w0 + 2; ++w) {
          const float g = dx[plane * 16 + h * 4 + w];
          sum += g;
          touched += g != 0.f;
        }
      }
      EXPECT_FLOAT_EQ(sum, 1.f) << "plane " << plane << " window " << window;
      EXPECT_EQ(touched, 1) << "plane " << plane << " window " << window;
    }
  }
}

TEST(CudnnEngineTest, SoftmaxMatchesTheNativeEngineAlongAnyAxis) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"", {2, 5, 3, 4}},     {"axis: 1", {4, 10}},    {"axis: 2", {2, 3, 7}},
      {"axis: 0", {6, 2, 2}}, {"axis: -1", {3, 4, 9}}, {"", {2, 1000}},
  };
  for (const auto& [axis, shape] : cases) {
    const std::string text = "name: 's' type: 'Softmax' softmax_param { " + axis + " }";
    ExpectCudnnMatchesTheCpu(text, {shape}, "native", 1e-5);
  }
}

TEST(CudnnEngineTest, ReLUMatchesTheNativeEngineInAndOutOfPlace) {
  CREMA_SKIP_WITHOUT_GPU();
  ExpectCudnnMatchesTheCpu("name: 'r' type: 'ReLU'", {{2, 3, 4, 5}}, "native", 0);
  ExpectCudnnMatchesTheCpu("name: 'r' type: 'ReLU'", {{7}}, "native", 0);
  // Exact zeros among the inputs: no gradient passes there in either engine; in place, too.
  const auto run = [](Device device, const std::string& engine, bool in_place) {
    auto context = std::make_shared<Context>(device, 0);
    context->force_engine("ReLU", engine);
    auto layer = LayerRegistry::Global().Create(Param("ReLU", ""), {{3, 40}}, context);
    test::BlobList bottom, top;
    Blob* x = bottom.Add({3, 40});
    test::FillGaussian(x, 0.f, 1.f, 5);
    for (int i = 0; i < x->count(); i += 4) x->mutable_cpu_data()[i] = 0.f;
    Blob* y = in_place ? x : top.Add({});
    layer->SetUp({x}, {y});
    layer->Forward({x}, {y});
    Blob gradient({3, 40});
    test::FillGaussian(&gradient, 0.f, 1.f, 6);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), y->mutable_cpu_diff());
    std::vector<float> result = test::DataOf(*y);
    layer->Backward({y}, {true}, {x});
    const std::vector<float> dx = test::DiffOf(*x);
    result.insert(result.end(), dx.begin(), dx.end());
    return result;
  };
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    EXPECT_EQ(run(Device::kGPU, "cudnn", in_place), run(Device::kCPU, "native", in_place));
  }
}

TEST(CudnnEngineTest, LRNMatchesTheNativeEngine) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"local_size: 5 alpha: 0.0001 beta: 0.75 k: 2", {2, 16, 7, 7}},  // AlexNet's
      {"local_size: 5 alpha: 0.0001 beta: 0.75", {2, 16, 7, 7}},       // CaffeNet's
      {"local_size: 3 alpha: 0.5 beta: 0.75", {2, 5, 4, 4}},
      {"local_size: 5 alpha: 3 beta: 0.75 k: 2", {2, 8, 3, 5}},
      {"local_size: 1 alpha: 2 beta: 1.5 k: 0.5", {1, 4, 3, 5}},
      {"local_size: 15 alpha: 1 beta: 0.6", {2, 20, 3, 3}},
      {"local_size: 7 alpha: 1", {2, 3, 4, 4}},  // a window wider than the channels
  };
  for (const auto& [lrn, shape] : cases)
    ExpectCudnnMatchesTheCpu("name: 'n' type: 'LRN' lrn_param { " + lrn + " }", {shape}, "native", 1e-4);
}

// Backward works from the input: a later in-place layer may have overwritten the top, in either engine.
TEST(CudnnEngineTest, LRNBackwardDoesNotReadTheTop) {
  CREMA_SKIP_WITHOUT_GPU();
  const auto run = [](Device device, const std::string& engine) {
    auto context = std::make_shared<Context>(device, 0);
    context->force_engine("LRN", engine);
    const LayerParameter param = Param("LRN", "lrn_param { local_size: 3 alpha: 2 }");
    auto layer = LayerRegistry::Global().Create(param, {{2, 6, 4, 4}}, context);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 6, 4, 4}), 0.f, 1.f, 21);
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    layer->Forward(bottom.pointers, top.pointers);
    top.pointers[0]->set_data(1000.f);
    Blob gradient({2, 6, 4, 4});
    test::FillGaussian(&gradient, 0.f, 1.f, 22);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), top.pointers[0]->mutable_cpu_diff());
    layer->Backward(top.pointers, {true}, bottom.pointers);
    return test::DiffOf(*bottom.pointers[0]);
  };
  ExpectClose({run(Device::kGPU, "cudnn")}, {run(Device::kCPU, "native")}, 1e-4, "bottom gradient");
}

TEST(CudnnEngineTest, SigmoidAndTanHMatchTheNativeEnginesInAndOutOfPlace) {
  CREMA_SKIP_WITHOUT_GPU();
  for (const std::string type : {"Sigmoid", "TanH"}) {
    SCOPED_TRACE(type);
    ExpectCudnnMatchesTheCpu("name: 'a' type: '" + type + "'", {{2, 3, 4, 5}}, "native", 1e-5);
    ExpectCudnnMatchesTheCpu("name: 'a' type: '" + type + "'", {{7}}, "native", 1e-5);
    // Values far into the saturated ends too.
    const auto run = [&](Device device, const std::string& engine, bool in_place) {
      auto context = std::make_shared<Context>(device, 0);
      context->force_engine(type, engine);
      auto layer = LayerRegistry::Global().Create(Param(type, ""), {{3, 50}}, context);
      EXPECT_EQ(layer->engine(), engine);
      test::BlobList bottom, top;
      Blob* x = bottom.Add({3, 50});
      test::FillGaussian(x, 0.f, 6.f, 23);
      Blob* y = in_place ? x : top.Add({});
      layer->SetUp({x}, {y});
      layer->Forward({x}, {y});
      Blob gradient({3, 50});
      test::FillGaussian(&gradient, 0.f, 1.f, 24);
      std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), y->mutable_cpu_diff());
      std::vector<std::vector<float>> result = {test::DataOf(*y)};
      layer->Backward({y}, {true}, {x});
      result.push_back(test::DiffOf(*x));
      return result;
    };
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(in_place ? "in place" : "out of place");
      ExpectClose(run(Device::kGPU, "cudnn", in_place), run(Device::kCPU, "native", in_place), 1e-5, "top, gradient");
    }
  }
}

// One BatchNorm run: the blobs start from stored statistics, `forwards` forward passes on fresh inputs (with batch
// statistics each moves the sums), then one backward pass. Returns the last top, the bottom gradient and the blobs.
std::vector<std::vector<float>> RunBatchNorm(const std::string& body, const std::vector<int>& shape, Device device,
                                             const std::string& engine, bool in_place, int forwards) {
  auto context = std::make_shared<Context>(device, 0);
  context->force_engine("BatchNorm", engine);
  auto layer = LayerRegistry::Global().Create(Param("BatchNorm", body), {shape}, context);
  EXPECT_EQ(layer->engine(), engine);
  test::BlobList bottom, top;
  Blob* x = bottom.Add(shape);
  Blob* y = in_place ? x : top.Add({});
  layer->SetUp({x}, {y});
  for (int c = 0; c < layer->params()[0]->count(); ++c) {
    layer->params()[0]->mutable_cpu_data()[c] = 0.4f * c - 0.3f;
    layer->params()[1]->mutable_cpu_data()[c] = 1.5f + 0.5f * c;
  }
  layer->params()[2]->mutable_cpu_data()[0] = 3.f;
  for (int f = 0; f < forwards; ++f) {
    test::FillGaussian(x, 0.7f, 1.5f, 30 + f);
    layer->Forward({x}, {y});
  }
  std::vector<std::vector<float>> result = {test::DataOf(*y)};
  Blob gradient(shape);
  test::FillGaussian(&gradient, 0.f, 1.f, 40);
  std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), y->mutable_cpu_diff());
  layer->Backward({y}, {true}, {x});
  result.push_back(test::DiffOf(*x));
  for (const auto& blob : layer->params()) result.push_back(test::DataOf(*blob));
  return result;
}

// The top, the gradient and the running statistics (what a snapshot stores) agree with the native engine's, with
// batch or stored statistics, over 1-d to 5-d inputs, in place or not.
TEST(CudnnEngineTest, BatchNormMatchesTheNativeEngineAndKeepsItsStatistics) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"phase: TRAIN", {4, 3, 5, 5}},
      {"phase: TRAIN", {8, 6}},
      {"phase: TRAIN", {10}},
      {"phase: TRAIN", {2, 3, 2, 3, 4}},
      {"phase: TRAIN batch_norm_param { moving_average_fraction: 0.5 eps: 0.001 }", {3, 4, 3, 3}},
      {"phase: TRAIN", {32, 64, 14, 14}},
      {"phase: TEST", {4, 3, 5, 5}},
      {"phase: TEST", {1, 5}},
      {"phase: TRAIN batch_norm_param { use_global_stats: true }", {4, 3, 5, 5}},
      {"phase: TEST batch_norm_param { use_global_stats: false }", {2, 3, 4, 4}},
  };
  for (const auto& [body, shape] : cases) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(body + " on " + ShapeString(shape) + (in_place ? ", in place" : ""));
      const auto gpu = RunBatchNorm(body, shape, Device::kGPU, "cudnn", in_place, 2);
      const auto cpu = RunBatchNorm(body, shape, Device::kCPU, "native", in_place, 2);
      ASSERT_EQ(gpu.size(), 5u);
      ExpectClose({gpu[0]}, {cpu[0]}, 1e-4, "top");
      ExpectClose({gpu[1]}, {cpu[1]}, 1e-4, "bottom gradient");
      ExpectClose({gpu[2], gpu[3], gpu[4]}, {cpu[2], cpu[3], cpu[4]}, 1e-5, "statistics blob");
    }
  }
}

// The registry on a GPU: cudnn where its refusal is empty, another engine where it refuses.
TEST(CudnnEngineTest, AGpuContextPicksCudnnExactlyWhereItAccepts) {
  CREMA_SKIP_WITHOUT_GPU();
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  const auto engine = [&](const LayerParameter& param, const std::vector<int>& shape) {
    return LayerRegistry::Global().Create(param, {shape}, context)->engine();
  };
  EXPECT_EQ(engine(Param("Convolution", "convolution_param { num_output: 2 kernel_size: 3 }"), {2, 3, 6, 6}), "cudnn");
  EXPECT_NE(engine(Param("Convolution", "convolution_param { num_output: 2 kernel_size: 3 }"), {2, 3, 6}), "cudnn");
  EXPECT_EQ(engine(Param("Pooling", "pooling_param { kernel_size: 2 stride: 2 }"), {2, 3, 6, 6}), "cudnn");
  EXPECT_NE(engine(Param("Pooling", "pooling_param { kernel_size: 3 stride: 2 }"), {2, 3, 8, 8}), "cudnn");
  EXPECT_NE(engine(Param("Pooling", "pooling_param { kernel_size: 2 stride: 2 }", 2), {2, 3, 6, 6}), "cudnn");
  EXPECT_EQ(engine(Param("ReLU", ""), {2, 3}), "cudnn");
  EXPECT_NE(engine(Param("ReLU", "relu_param { negative_slope: 0.2 }"), {2, 3}), "cudnn");
  EXPECT_EQ(engine(Param("Softmax", ""), {2, 3}), "cudnn");
  EXPECT_EQ(engine(Param("Sigmoid", ""), {2, 3}), "cudnn");
  EXPECT_NE(engine(Param("Sigmoid", "sigmoid_param { engine: CAFFE }"), {2, 3}), "cudnn");
  EXPECT_EQ(engine(Param("TanH", ""), {2, 3}), "cudnn");
  EXPECT_EQ(engine(Param("LRN", ""), {2, 3, 4, 4}), "cudnn");
  EXPECT_NE(engine(Param("LRN", "lrn_param { norm_region: WITHIN_CHANNEL }"), {2, 3, 4, 4}), "cudnn");
  EXPECT_EQ(engine(Param("BatchNorm", "phase: TRAIN"), {2, 3, 4, 4}), "cudnn");
  EXPECT_NE(engine(Param("BatchNorm", "phase: TRAIN"), {1, 3}), "cudnn");
  EXPECT_EQ(engine(Param("BatchNorm", "phase: TEST"), {1, 3}), "cudnn");
}

// Parameter gradients accumulate over backward passes (beta 1); the bottom gradient is overwritten (beta 0).
TEST(CudnnEngineTest, ParameterGradientsAccumulateAndBottomGradientsAreOverwritten) {
  CREMA_SKIP_WITHOUT_GPU();
  for (const char* type : {"Convolution", "Deconvolution"}) {
    SCOPED_TRACE(type);
    auto context = std::make_shared<Context>(Device::kGPU, 0);
    const LayerParameter param =
        Param(type, std::string("convolution_param { num_output: 3 kernel_size: 3 ") + kFillers + " }");
    auto layer = LayerRegistry::Global().Create(param, {{2, 2, 6, 6}}, context);
    ASSERT_EQ(layer->engine(), "cudnn");
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 2, 6, 6}), 0.f, 1.f, 3);
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    layer->Forward(bottom.pointers, top.pointers);
    test::FillGaussian(top.pointers[0], 0.f, 1.f, 4);
    const std::vector<float> dy = test::DataOf(*top.pointers[0]);
    std::copy(dy.begin(), dy.end(), top.pointers[0]->mutable_cpu_diff());
    for (const auto& blob : layer->params()) blob->set_diff(0.f);
    layer->Backward(top.pointers, {true}, bottom.pointers);
    std::vector<std::vector<float>> once;
    for (const auto& blob : layer->params()) once.push_back(test::DiffOf(*blob));
    const std::vector<float> dx_once = test::DiffOf(*bottom.pointers[0]);
    layer->Backward(top.pointers, {true}, bottom.pointers);
    for (size_t i = 0; i < layer->params().size(); ++i) {
      std::vector<float> doubled = once[i];
      for (float& v : doubled) v *= 2;
      ExpectClose({test::DiffOf(*layer->params()[i])}, {doubled}, 1e-5, "parameter " + std::to_string(i));
    }
    ExpectClose({test::DiffOf(*bottom.pointers[0])}, {dx_once}, 1e-6, "bottom gradient");
  }
}

TEST(CudnnEngineTest, GradientsCheckOnTheGpu) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {ConvolutionText("Convolution", "num_output: 2 kernel_size: 3 pad: 1 stride: 2"), {2, 2, 5, 5}},
      {ConvolutionText("Deconvolution", "num_output: 2 kernel_size: 3 stride: 2"), {1, 2, 3, 3}},
      {"name: 'p' type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 }", {1, 2, 4, 4}},
      {"name: 'p' type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }", {1, 2, 4, 4}},
      {"name: 's' type: 'Softmax'", {2, 4, 3}},
      {"name: 'n' type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 }", {2, 5, 3, 3}},
      {"name: 'a' type: 'Sigmoid'", {2, 3, 4}},
      {"name: 'a' type: 'TanH'", {2, 3, 4}},
      {"name: 'b' type: 'BatchNorm' phase: TRAIN", {4, 3, 2, 2}},
      {"name: 'b' type: 'BatchNorm' phase: TEST", {2, 3, 2, 2}},
  };
  for (const auto& [text, shape] : cases) {
    SCOPED_TRACE(text);
    auto context = std::make_shared<Context>(Device::kGPU, 0);
    LayerParameter param = test::ParseLayer(text);
    param.add_bottom("in");
    param.add_top("out");
    auto layer = LayerRegistry::Global().Create(param, {shape}, context);
    ASSERT_EQ(layer->engine(), "cudnn");
    test::BlobList bottom, top;
    // Values 0.1 apart, scattered (7919 is prime, so i * 7919 mod count visits every index once): no two
    // inputs of a MAX window come within the checker's step of each other.
    Blob* input = bottom.Add(shape);
    for (int i = 0; i < input->count(); ++i)
      input->mutable_cpu_data()[i] = 0.1f * static_cast<float>(i * 7919 % input->count() - input->count() / 2);
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
    test::GradientChecker(1e-2f, 1e-2f).CheckGradient(layer.get(), bottom.pointers, top.pointers);
  }
  // ReLU away from its kink.
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  auto relu = LayerRegistry::Global().Create(Param("ReLU", ""), {{3, 5}}, context);
  ASSERT_EQ(relu->engine(), "cudnn");
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 5}), 0.f, 1.f, 10);
  top.Add({});
  relu->SetUp(bottom.pointers, top.pointers);
  test::GradientChecker(1e-2f, 1e-3f, 1701, 0.f, 0.02f).CheckGradient(relu.get(), bottom.pointers, top.pointers);
}

// Deterministic mode: only deterministic algorithms, and two backward passes give the same bits.
TEST(CudnnEngineTest, DeterministicModeRepeatsGradientsBitForBit) {
  CREMA_SKIP_WITHOUT_GPU();
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  context->set_deterministic(true);
  const std::string conv = std::string("num_output: 8 kernel_size: 3 pad: 1") + kFillers;
  const LayerParameter param = Param("Convolution", "convolution_param { " + conv + " }");
  auto layer = LayerRegistry::Global().Create(param, {{8, 16, 12, 12}}, context);
  ASSERT_EQ(layer->engine(), "cudnn");
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({8, 16, 12, 12}), 0.f, 1.f, 11);
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  const auto& plan = static_cast<const CudnnConvolutionLayer&>(*layer).plan();
  EXPECT_NE(plan.algorithm(cudnn::Direction::kBackwardData), CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  EXPECT_NE(plan.algorithm(cudnn::Direction::kBackwardFilter), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_NE(plan.algorithm(cudnn::Direction::kBackwardFilter), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3);
  layer->Forward(bottom.pointers, top.pointers);
  test::FillGaussian(top.pointers[0], 0.f, 1.f, 12);
  const std::vector<float> dy = test::DataOf(*top.pointers[0]);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    std::copy(dy.begin(), dy.end(), top.pointers[0]->mutable_cpu_diff());
    for (const auto& blob : layer->params()) blob->set_diff(0.f);
    layer->Backward(top.pointers, {true}, bottom.pointers);
    std::vector<float> all = test::DiffOf(*bottom.pointers[0]);
    for (const auto& blob : layer->params()) {
      const std::vector<float> diff = test::DiffOf(*blob);
      all.insert(all.end(), diff.begin(), diff.end());
    }
    runs.push_back(all);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// A limit of 0 bytes leaves the algorithms that need no workspace, or a clear error naming the limit.
TEST(CudnnEngineTest, TheWorkspaceLimitBoundsTheChoice) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::string text = ConvolutionText("Convolution", "num_output: 8 kernel_size: 3 pad: 1");
  std::vector<std::vector<float>> params;
  const Outcome cpu = RunEngine(text, {{2, 4, 10, 10}}, Device::kCPU, "reference", &params);
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  context->set_cudnn_workspace_limit(0);
  LayerParameter param = test::ParseLayer(text);
  param.add_bottom("in0");
  param.add_top("out0");
  auto layer = LayerRegistry::Global().Create(param, {{2, 4, 10, 10}}, context);
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 4, 10, 10}), 0.f, 1.f, 100);
  top.Add({});
  try {
    layer->SetUp(bottom.pointers, top.pointers);
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("CREMA_CUDNN_WORKSPACE_LIMIT_MB"), std::string::npos) << message;
    return;
  }
  const auto& plan = static_cast<const CudnnConvolutionLayer&>(*layer).plan();
  EXPECT_EQ(plan.largest_workspace_bytes(), 0u);
  EXPECT_EQ(layer->workspace_floats(), 0u);
  for (size_t i = 0; i < params.size(); ++i)
    std::copy(params[i].begin(), params[i].end(), layer->params()[i]->mutable_cpu_data());
  layer->Forward(bottom.pointers, top.pointers);
  ExpectClose({test::DataOf(*top.pointers[0])}, cpu.tops, 1e-4, "top");
}

// The ranking of a shape is kept for the process: a second layer of the same shape adds no entry.
TEST(CudnnEngineTest, AShapeIsRankedOncePerProcess) {
  CREMA_SKIP_WITHOUT_GPU();
  auto context = std::make_shared<Context>(Device::kGPU, 0);
  const LayerParameter param = Param("Convolution", "convolution_param { num_output: 7 kernel_size: 5 pad: 2 }");
  const auto set_up = [&] {
    auto layer = LayerRegistry::Global().Create(param, {{3, 5, 13, 11}}, context);
    test::BlobList bottom, top;
    bottom.Add({3, 5, 13, 11});
    top.Add({});
    layer->SetUp(bottom.pointers, top.pointers);
  };
  const size_t before = cudnn::AlgorithmCache::Global().size();
  set_up();
  const size_t after = cudnn::AlgorithmCache::Global().size();
  EXPECT_GE(after, before);
  EXPECT_LE(after, before + 3);  // forward, backward data, backward filter (none if a repeat of this test ranked it)
  set_up();
  EXPECT_EQ(cudnn::AlgorithmCache::Global().size(), after);
}

// Both rankings run: a net of convolutions (a 1x1, a strided 3x3, a 5x5, a grouped one) with the algorithms
// cuDNN's timings chose and with the heuristics' gives the same outputs and gradients, to float rounding.
TEST(CudnnEngineTest, MeasuredAndHeuristicAlgorithmsGiveTheSameResults) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::string text = R"(
    force_backward: true
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 8 dim: 16 dim: 28 dim: 28 } } }
    layer { name: 'c1' type: 'Convolution' bottom: 'data' top: 'c1'
            convolution_param { num_output: 32 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.2 } } }
    layer { name: 'c2' type: 'Convolution' bottom: 'c1' top: 'c2'
            convolution_param { num_output: 32 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'c3' type: 'Convolution' bottom: 'c2' top: 'c3'
            convolution_param { num_output: 24 kernel_size: 5 pad: 2 weight_filler { type: 'gaussian' std: 0.05 } } }
    layer { name: 'c4' type: 'Convolution' bottom: 'c3' top: 'c4'
            convolution_param { num_output: 24 kernel_size: 3 pad: 1 group: 4 weight_filler { type: 'gaussian' std: 0.1 } } }
  )";
  std::vector<std::vector<float>> results[2];
  NetParameter weights;
  for (int measured = 0; measured < 2; ++measured) {
    auto context = std::make_shared<Context>(Device::kGPU, 0);
    context->set_cudnn_algorithms(measured ? Context::CudnnAlgorithms::kMeasured
                                           : Context::CudnnAlgorithms::kHeuristic);
    Net net(test::ParseNet(text), context);
    if (measured) {
      net.CopyTrainedLayersFrom(weights);
    } else {
      net.ToProto(&weights);
    }
    test::FillGaussian(net.blob_by_name("data"), 0.f, 1.f, 29);
    net.Forward();
    Blob* top = net.blob_by_name("c4");
    RandomStream random(31);
    float* gradient = top->mutable_cpu_diff();
    for (int i = 0; i < top->count(); ++i) gradient[i] = static_cast<float>(random.UniformInt(2001)) / 1000.f - 1.f;
    net.Backward();
    results[measured].push_back(test::DataOf(*top));
    for (Blob* param : net.learnable_params()) results[measured].push_back(test::DiffOf(*param));
    results[measured].push_back(test::DiffOf(*net.blob_by_name("data")));
  }
  ExpectClose(results[1], results[0], 1e-4, "measured against heuristic");
}

// In a net: every layer on its cuDNN engine, the workspace shared, the outputs those of the net on the CPU.
TEST(CudnnEngineTest, ANetOfCudnnLayersGivesTheCpuNetsOutputs) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::string text = R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 12 dim: 12 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 8 kernel_size: 5 pad: 2
                                weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'conv2' type: 'Convolution' bottom: 'pool1' top: 'conv2'
            convolution_param { num_output: 5 kernel_size: 3
                                weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'pool2' type: 'Pooling' bottom: 'conv2' top: 'pool2' pooling_param { pool: AVE global_pooling: true } }
    layer { name: 'prob' type: 'Softmax' bottom: 'pool2' top: 'prob' }
  )";
  Net cpu(test::ParseNet(text), std::make_shared<Context>());
  Net gpu(test::ParseNet(text), std::make_shared<Context>(Device::kGPU, 0));
  for (const auto& layer : gpu.layers()) {
    if (layer->type() != std::string("Input")) {
      EXPECT_EQ(layer->engine(), "cudnn") << layer->name();
    }
  }
  NetParameter weights;
  cpu.ToProto(&weights);
  gpu.CopyTrainedLayersFrom(weights);
  test::FillGaussian(cpu.blob_by_name("data"), 0.f, 1.f, 13);
  test::FillGaussian(gpu.blob_by_name("data"), 0.f, 1.f, 13);
  cpu.Forward();
  gpu.Forward();
  // In plain order: the CPU net's oneDNN engines keep the blobs between them in their own layouts.
  for (const char* blob : {"pool1", "conv2", "prob"})
    ExpectClose({PlainValues(*gpu.blob_by_name(blob))}, {PlainValues(*cpu.blob_by_name(blob))}, 1e-4, blob);
}

#endif  // CREMA_USE_CUDNN

}  // namespace
}  // namespace crema
