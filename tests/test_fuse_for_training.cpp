// Training's fusions (net/fuse.hpp, fuse_for_training): BatchNorm with the Scale and ReLU in place after it
// (layers/normalization/batch_norm_affine.hpp), and a SUM with the ReLU after it. The fused layers' gradients are the
// numeric ones, a net trained with them computes what the separate layers compute (they have tests of their own) in
// every layout their engines use, the Scale's parameters stay the ones files, solvers and updates see, and the pass
// leaves alone what it must.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/common/eltwise.hpp"
#include "layers/layer_registry.hpp"
#include "layers/normalization/batch_norm.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// y = sum of w * top for fixed random w: its gradient with respect to the scale's and bias's values, central
// differences against the layer's backward.
void ExpectAffineGradientsNumeric(BatchNormLayer* layer, const test::BlobList& bottom, const test::BlobList& top,
                                  Blob* scale, Blob* bias) {
  Blob weights(top.pointers[0]->shape());
  test::FillGaussian(&weights, 0.f, 1.f, 91);
  const auto objective = [&] {
    layer->Forward(bottom.pointers, top.pointers);
    double sum = 0;
    for (int i = 0; i < weights.count(); ++i)
      sum += static_cast<double>(weights.cpu_data()[i]) * top.pointers[0]->cpu_data()[i];
    return sum;
  };
  objective();
  std::copy(weights.cpu_data(), weights.cpu_data() + weights.count(), top.pointers[0]->mutable_cpu_diff());
  scale->set_diff(0.f);
  bias->set_diff(0.f);
  layer->Backward(top.pointers, {true}, bottom.pointers);
  const float step = 1e-3f;
  for (Blob* blob : {scale, bias}) {
    const std::vector<float> analytic = test::DiffOf(*blob);
    for (int c = 0; c < blob->count(); ++c) {
      const float value = blob->cpu_data()[c];
      blob->mutable_cpu_data()[c] = value + step;
      const double up = objective();
      blob->mutable_cpu_data()[c] = value - step;
      const double down = objective();
      blob->mutable_cpu_data()[c] = value;
      const double numeric = (up - down) / (2 * step);
      EXPECT_NEAR(analytic[c], numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << "channel " << c;
    }
  }
}

// The host rehearsal of GPU code (Context::set_gpu_code_on_host): the layers run their GPU slots on the CPU.
std::shared_ptr<Context> RehearsalContext() {
  auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->set_gpu_code_on_host(true);
  return context;
}

void CheckFusedLayer(Phase phase, uint64_t seed, std::shared_ptr<Context> context = nullptr) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 3, 2}), 0.5f, 1.f, seed);
  top.Add({});
  LayerParameter param = test::ParseLayer("name: 'bn' type: 'BatchNorm'");
  param.set_phase(phase);
  BatchNormLayer layer(param, context);
  layer.SetUp(bottom.pointers, top.pointers);
  if (phase == TEST) {  // stored statistics
    test::FillUniform(layer.params()[0].get(), -1.f, 1.f, seed + 1);
    test::FillUniform(layer.params()[1].get(), 0.5f, 2.f, seed + 2);
    layer.params()[2]->mutable_cpu_data()[0] = 1.5f;
  }
  auto scale = std::make_shared<Blob>(std::vector<int>{3});
  auto bias = std::make_shared<Blob>(std::vector<int>{3});
  test::FillUniform(scale.get(), 0.5f, 2.f, seed + 3);
  test::FillUniform(bias.get(), -1.f, 1.f, seed + 4);
  layer.AbsorbAffine(scale, bias, true, true, false);
  layer.Reshape(bottom.pointers, top.pointers);  // (GPU code: the workspace for the Scale's sums)
  // The input's gradient (the layer's own blobs are statistics: no gradient), then the scale's and bias's.
  test::GradientChecker(1e-2f, phase == TRAIN ? 1e-2f : 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
  ExpectAffineGradientsNumeric(&layer, bottom, top, scale.get(), bias.get());
}

TEST(FuseForTrainingTest, TheFusedLayersGradientsAreTheNumericOnes) {
  CheckFusedLayer(TRAIN, 21);  // through the batch's statistics
  CheckFusedLayer(TEST, 31);   // through stored ones
}

TEST(FuseForTrainingTest, TheFusedSumsGradientsAreTheNumericOnes) {
  // Three and ten bottoms (the loop over any number; in GPU code ten take two passes, kEltwiseGroup, the ReLU after the
  // second) and two (a residual sum's), a leaky slope and ReLU's 0, on the CPU and in the GPU code rehearsed on the
  // host.
  for (const auto& context : {std::shared_ptr<Context>(), RehearsalContext()})
    for (int bottoms : {3, 2, 10})
      for (float slope : {0.2f, 0.f}) {
        SCOPED_TRACE(std::to_string(bottoms) + " bottoms, slope " + std::to_string(slope) +
                     (context ? ", GPU code" : ", CPU"));
        test::BlobList bottom, top;
        for (int b = 0; b < bottoms; ++b) test::FillGaussian(bottom.Add({2, 3, 2, 3}), 0.f, 1.f, 50 + b);
        top.Add({});
        LayerParameter param = test::ParseLayer(bottoms == 3 ? "name: 'sum' type: 'Eltwise' eltwise_param { coeff: 1.5 "
                                                               "coeff: -2 coeff: 0.5 }"
                                                             : "name: 'sum' type: 'Eltwise'");
        EltwiseLayer layer(param, context);
        layer.SetUp(bottom.pointers, top.pointers);
        layer.AbsorbReLU(slope);
        EXPECT_TRUE(layer.BackwardReadsTop(0));
        layer.Forward(bottom.pointers, top.pointers);
        // ReLU of the sum, as the separate layers give it.
        for (int k = 0; k < top.pointers[0]->count(); ++k) {
          const float c[3] = {1.5f, -2.f, 0.5f};
          float sum = 0.f;
          for (int b = 0; b < bottoms; ++b) sum += (bottoms == 3 ? c[b] : 1.f) * bottom.pointers[b]->cpu_data()[k];
          ASSERT_FLOAT_EQ(top.pointers[0]->cpu_data()[k], sum > 0.f ? sum : slope * sum) << k;
        }
        // The kink is where the sum is 0; these inputs keep every sum more than a step away from it.
        test::GradientChecker(1e-3f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
      }
}

// A convolution, BatchNorm, Scale and ReLU in place (a ResNet's unit), a 1 x 1 convolution and a Euclidean loss.
std::string UnitNet(const std::string& batch_norm, const std::string& scale, const std::string& relu) {
  return R"(
    name: 'unit'
    force_backward: true
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 3 dim: 5 dim: 6 dim: 7 } shape { dim: 3 dim: 16 dim: 6 dim: 7 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false
                                weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' )" +
         batch_norm + R"( }
    layer { name: 'sc1' type: 'Scale' bottom: 'conv1' top: 'conv1' )" +
         scale + R"( }
    )" + relu +
         R"(
    layer { name: 'conv2' type: 'Convolution' bottom: 'conv1' top: 'out'
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'out' bottom: 'target' top: 'loss' }
  )";
}

const char kReLU[] = "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }";

// `context`: the CPU's by default.
std::unique_ptr<Net> BuildUnit(const std::string& text, bool fuse, const std::string& engine,
                               std::shared_ptr<Context> context = nullptr) {
  NetParameter param = test::ParseNet(text);
  param.mutable_state()->set_phase(TRAIN);
  param.set_fold(fuse);
  if (context == nullptr) context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->force_engine("Convolution", engine);
  context->force_engine("BatchNorm", engine);
  auto net = std::make_unique<Net>(param, context);
  uint64_t seed = 41;
  for (const auto& layer : net->layers())
    if (std::string(layer->type()) == "Scale")
      for (const auto& blob : layer->params()) test::FillUniform(blob.get(), -1.f, 1.5f, seed++);
  for (Blob* input : net->input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
  return net;
}

// Within 1e-5 of the largest magnitude of `expected` (the fused backward sums in another arrangement).
void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  float largest = 0.f;
  for (float v : expected) largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-5f * std::max(largest, 1e-3f)) << what << " at " << i;
}

// Two training steps in the fused and the separate net, side by side: each the same loss, input gradient and
// parameter gradients, and the blobs of layers `compared` (running statistics, the Scale's parameters) the same; then
// a step down the gradient (as a solver takes, into the layers' own blobs), for the next pass to read.
void TrainSideBySide(Net* fused, Net* separate, const std::vector<std::string>& compared = {}) {
  for (int pass = 0; pass < 2; ++pass) {
    const float fused_loss = fused->ForwardBackward(), separate_loss = separate->ForwardBackward();
    ASSERT_NEAR(fused_loss, separate_loss, 1e-5f * std::abs(separate_loss)) << "pass " << pass;
    ExpectClose(test::DiffOf(*fused->blob_by_name("data")), test::DiffOf(*separate->blob_by_name("data")),
                "the input's gradient");
    ASSERT_EQ(fused->learnable_params().size(), separate->learnable_params().size());
    for (size_t p = 0; p < fused->learnable_params().size(); ++p) {
      ExpectClose(test::DiffOf(*fused->learnable_params()[p]), test::DiffOf(*separate->learnable_params()[p]),
                  "parameter " + std::to_string(p) + "'s gradient");
    }
    for (const std::string& layer : compared)
      for (size_t b = 0; b < fused->layer_by_name(layer)->params().size(); ++b)
        ExpectClose(test::DataOf(*fused->layer_by_name(layer)->params()[b]),
                    test::DataOf(*separate->layer_by_name(layer)->params()[b]), layer + " blob " + std::to_string(b));
    for (Net* net : {fused, separate}) {
      for (Blob* blob : net->learnable_params())
        for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] -= 1e-3f * blob->cpu_diff()[i];
      net->ClearParamDiffs();
    }
  }
}

// Forward, backward, a step down the gradient and forward again, in the fused and the separate net: the same loss,
// input gradient, parameter gradients and running statistics.
// `make_context`: each net's context (the CPU's by default).
void ExpectFusedMatchesSeparate(const std::string& text, const std::string& engine, bool expect_relu_fused,
                                const std::function<std::shared_ptr<Context>()>& make_context = nullptr) {
  SCOPED_TRACE(engine + ": " + text);
  std::unique_ptr<Net> fused = BuildUnit(text, true, engine, make_context ? make_context() : nullptr),
                       separate = BuildUnit(text, false, engine, make_context ? make_context() : nullptr);
  ASSERT_EQ(fused->rewrites().size(), 1u);
  EXPECT_NE(fused->rewrites()[0].find("bn1 (BatchNorm): runs sc1 (Scale)"), std::string::npos) << fused->rewrites()[0];
  EXPECT_EQ(fused->rewrites()[0].find("relu1") != std::string::npos, expect_relu_fused) << fused->rewrites()[0];
  EXPECT_TRUE(separate->rewrites().empty());
  EXPECT_EQ(fused->plan().size() + (expect_relu_fused ? 2 : 1), separate->plan().size());
#ifdef CREMA_USE_ONEDNN
  if (engine == "onednn") {
    EXPECT_NE(fused->blob_by_name("conv1")->layout(), Layout::kPlain);
  }
#endif
  TrainSideBySide(fused.get(), separate.get(), {"bn1", "sc1"});
}

// ResNet units to fuse, each with whether its ReLU is fused: with and without a bias or a ReLU, a frozen scale (lr_mult
// 0: no gradient, as the Scale would compute none), a frozen BatchNorm, both frozen.
std::vector<std::pair<std::string, bool>> UnitNets() {
  return {{UnitNet("", "scale_param { bias_term: true }", kReLU), true},
          {UnitNet("", "scale_param { bias_term: false }", kReLU), true},
          {UnitNet("", "scale_param { bias_term: true }", ""), false},
          {UnitNet("", "scale_param { bias_term: true } param { lr_mult: 0 }", kReLU), true},
          {UnitNet("batch_norm_param { use_global_stats: true }", "scale_param { bias_term: true }", kReLU), true},
          {UnitNet("batch_norm_param { use_global_stats: true }",
                   "scale_param { bias_term: true } param { lr_mult: 0 } param { lr_mult: 0 }", kReLU),
           true}};
}

// The BatchNorm's fused Scale and ReLU in GPU code (BatchNormAffine's rules), rehearsed on the host: each unit fused
// against its separate layers in GPU code too; the layer's gradients against the numeric ones. (cuDNN's engine, which
// runs the same rules after its own normalization, on a GPU: GpuFuseForTrainingTest.)
TEST(FuseForTrainingTest, TheGpuCodeRehearsedOnTheHostRunsTheBatchNormsScaleAndReLU) {
  for (const auto& [text, relu] : UnitNets()) ExpectFusedMatchesSeparate(text, "native", relu, RehearsalContext);
  for (Phase phase : {TRAIN, TEST}) CheckFusedLayer(phase, phase == TRAIN ? 31 : 37, RehearsalContext());
}

TEST(FuseForTrainingTest, TrainingMatchesTheSeparateLayersInEveryLayout) {
  std::vector<std::string> engines = {"native"};
#ifdef CREMA_USE_ONEDNN
  engines.push_back("onednn");  // channel blocks
#endif
  for (const std::string& engine : engines) {
    for (const auto& [text, relu] : UnitNets()) ExpectFusedMatchesSeparate(text, engine, relu);
    // A leaky ReLU is not fused; the Scale is.
    ExpectFusedMatchesSeparate(
        UnitNet("", "scale_param { bias_term: true }",
                "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' relu_param { negative_slope: 0.1 } }"),
        engine, false);
  }
}

// A residual unit: conv1 -> bn1 -> sc1 (a branch) and conv2 (the shortcut), summed, then the ReLU in place.
// `channels`: the input's (with 16, every convolution writes the same layout in every engine).
std::string ResidualNet(const std::string& sum, const std::string& relu, int channels = 16) {
  return R"(
    name: 'residual'
    force_backward: true
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 3 dim: )" +
         std::to_string(channels) + R"( dim: 6 dim: 7 } shape { dim: 3 dim: 16 dim: 6 dim: 7 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false
                                weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }
    layer { name: 'sc1' type: 'Scale' bottom: 'conv1' top: 'conv1' scale_param { bias_term: true } }
    layer { name: 'conv2' type: 'Convolution' bottom: 'data' top: 'conv2'
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'conv1' bottom: 'conv2' top: 'sum' )" +
         sum + R"( }
    )" + relu +
         R"(
    layer { name: 'conv3' type: 'Convolution' bottom: 'sum' top: 'out'
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'out' bottom: 'target' top: 'loss' }
  )";
}

// A residual unit's sum with its ReLU (slope 0, and a leaky one with coefficients) fused for training, trained side by
// side with the separate layers, on `engine` and contexts of `make_context` (the CPU's by default).
void ExpectResidualSumsMatch(const std::string& engine,
                             const std::function<std::shared_ptr<Context>()>& make_context = nullptr) {
  const std::string relu = "layer { name: 'relu' type: 'ReLU' bottom: 'sum' top: 'sum' }";
  const std::string leaky =
      "layer { name: 'relu' type: 'ReLU' bottom: 'sum' top: 'sum' relu_param { negative_slope: 0.3 } }";
  for (const std::string& text :
       {ResidualNet("", relu), ResidualNet("eltwise_param { coeff: 0.5 coeff: -1 }", leaky)}) {
    SCOPED_TRACE(engine + ": " + text);
    std::unique_ptr<Net> fused = BuildUnit(text, true, engine, make_context ? make_context() : nullptr),
                         separate = BuildUnit(text, false, engine, make_context ? make_context() : nullptr);
    ASSERT_EQ(fused->rewrites().size(), 2u);
    EXPECT_EQ(fused->rewrites()[0], "bn1 (BatchNorm): runs sc1 (Scale) in its own passes, for training");
    EXPECT_EQ(fused->rewrites()[1], "sum (Eltwise): runs relu (ReLU) in its own passes, for training");
    EXPECT_EQ(fused->plan().size() + 2, separate->plan().size());
#ifdef CREMA_USE_ONEDNN
      if (engine == "onednn") {
        EXPECT_NE(fused->blob_by_name("sum")->layout(), Layout::kPlain);
      }
#endif
      TrainSideBySide(fused.get(), separate.get());
  }
}

TEST(FuseForTrainingTest, ResidualSumsWithTheirReLUMatchTheSeparateLayersInEveryLayout) {
  std::vector<std::string> engines = {"native"};
#ifdef CREMA_USE_ONEDNN
  engines.push_back("onednn");  // channel blocks; the SUM is oneDNN's unless fused
#endif
  for (const std::string& engine : engines) ExpectResidualSumsMatch(engine);
  const std::string relu = "layer { name: 'relu' type: 'ReLU' bottom: 'sum' top: 'sum' }";
  // A product is not fused.
  EXPECT_EQ(BuildUnit(ResidualNet("eltwise_param { operation: PROD }", relu), true, "native")->rewrites().size(), 1u);
#ifdef CREMA_USE_ONEDNN
  // Nor a sum of bottoms in two layouts (oneDNN's sum reads each in its own): the 1 x 1 convolution over 5 channels
  // writes channels-last, the BatchNorm's run channel blocks.
  std::unique_ptr<Net> mixed = BuildUnit(ResidualNet("", relu, 5), true, "onednn");
  ASSERT_NE(mixed->blob_by_name("conv1")->layout(), mixed->blob_by_name("conv2")->layout());
  EXPECT_EQ(mixed->rewrites().size(), 1u);
#endif
}

// The residual sum's ReLU in GPU code (EltwiseForwardRule's and EltwiseBackwardRule's `rectify`), rehearsed.
TEST(FuseForTrainingTest, TheGpuCodeRehearsedOnTheHostRunsTheSumsReLU) {
  ExpectResidualSumsMatch("native", RehearsalContext);
}

TEST(GpuFuseForTrainingTest, TheGpuEnginesRunTheBatchNormsScaleAndReLUAsTheSeparateLayers) {
  CREMA_SKIP_WITHOUT_GPU();
  std::vector<std::string> engines = {"native"};
#ifdef CREMA_USE_CUDNN
  engines.push_back("cudnn");
#endif
  const auto gpu = [] { return std::make_shared<Context>(Device::kGPU, 0, 7); };
  for (const std::string& engine : engines) {
    for (const auto& [text, relu] : UnitNets()) ExpectFusedMatchesSeparate(text, engine, relu, gpu);
    ExpectResidualSumsMatch(engine, gpu);
  }
}

// Convolutions with the ReLU in place after them (GoogLeNet's, CaffeNet's), one leaky, one a deconvolution.
std::string ActivationNet(const std::string& slope) {
  return R"(
    name: 'activations'
    force_backward: true
    layer { name: 'data' type: 'Input' top: 'data' top: 'target'
            input_param { shape { dim: 2 dim: 16 dim: 6 dim: 7 } shape { dim: 2 dim: 16 dim: 12 dim: 14 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 32 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.2 }
                                bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' )" +
         slope + R"( }
    layer { name: 'up' type: 'Deconvolution' bottom: 'conv1' top: 'up'
            convolution_param { num_output: 16 kernel_size: 2 stride: 2 weight_filler { type: 'gaussian' std: 0.2 } } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'up' top: 'up' }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'up' bottom: 'target' top: 'loss' }
  )";
}

TEST(FuseForTrainingTest, ConvolutionsWithTheirReLUMatchTheSeparateLayers) {
#ifdef CREMA_USE_ONEDNN
  for (const std::string slope : {"", "relu_param { negative_slope: 0.2 }"}) {
    const std::string text = ActivationNet(slope);
    SCOPED_TRACE(text);
    std::unique_ptr<Net> fused = BuildUnit(text, true, "onednn"), separate = BuildUnit(text, false, "onednn");
    ASSERT_EQ(fused->rewrites().size(), 2u);
    EXPECT_EQ(fused->rewrites()[0], "conv1 (Convolution): runs relu1 (ReLU) in its own passes, for training");
    EXPECT_EQ(fused->rewrites()[1], "up (Deconvolution): runs relu2 (ReLU) in its own passes, for training");
    EXPECT_EQ(fused->plan().size() + 2, separate->plan().size());
    EXPECT_TRUE(fused->layer_by_name("conv1")->BackwardReadsTop(0));
    TrainSideBySide(fused.get(), separate.get());
  }
#endif
  // The native engine would apply the ReLU in a pass of its own after its work: left alone (the deconvolution,
  // whose engine is not forced, may take its ReLU).
  const std::unique_ptr<Net> native = BuildUnit(ActivationNet(""), true, "native");
  for (const std::string& rewrite : native->rewrites()) EXPECT_EQ(rewrite.find("conv1"), std::string::npos) << rewrite;
}

TEST(FuseForTrainingTest, AFusedReLUsGradientIsTheNumericOne) {
  // A leaky slope (a gradient on both sides of the kink), on each engine that may hold one.
  const std::vector<std::string> engines = LayerRegistry::Global().Engines("Convolution", Device::kCPU);
  for (const std::string engine : {"native", "onednn"}) {
    if (std::find(engines.begin(), engines.end(), engine) == engines.end()) continue;
    SCOPED_TRACE(engine);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add({2, 3, 5, 4}), 0.f, 1.f, 61);
    top.Add({});
    std::unique_ptr<Layer> layer = test::CreateWithEngine(
        test::ParseLayer("name: 'conv' type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 pad: 1 "
                         "weight_filler { type: 'gaussian' std: 0.1 } }"),
        {{2, 3, 5, 4}}, engine);
    FusedActivation relu;
    relu.kind = FusedActivation::kReLU;
    relu.alpha = 0.1f;
    layer->set_fused_activation_with_backward(relu);
    layer->SetUp(bottom.pointers, top.pointers);
    EXPECT_TRUE(layer->BackwardReadsTop(0));
    // Biases of 3 and -3 keep every output of channels 0 and 2 above the kink and of 1 and 3 below it (the products
    // stay under 2 in magnitude here), so no step of the check crosses it and both slopes are checked.
    const float biases[4] = {3.f, -3.f, 3.f, -3.f};
    std::copy(biases, biases + 4, layer->params()[1]->mutable_cpu_data());
    layer->Forward(bottom.pointers, top.pointers);
    for (int k = 0; k < top.pointers[0]->count(); ++k) ASSERT_GT(std::abs(top.pointers[0]->cpu_data()[k]), 0.1f) << k;
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(layer.get(), bottom.pointers, top.pointers);
  }
  // Other activations stay inference's.
  auto layer = test::MakeLayer("name: 'conv' type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 }",
                               {2, 3, 5, 4});
  FusedActivation sigmoid;
  sigmoid.kind = FusedActivation::kSigmoid;
  test::ExpectErrorContaining([&] { layer->set_fused_activation_with_backward(sigmoid); },
                              {"only a ReLU of slope 0 or more", "Sigmoid"});
}

TEST(FuseForTrainingTest, WhatThePassLeavesAlone) {
  const std::string in_place = UnitNet("", "scale_param { bias_term: true }", kReLU);
  // Nets that say no: the net's fold: false, the context's (--fold=none), debug_info.
  EXPECT_TRUE(BuildUnit(in_place, false, "native")->rewrites().empty());
  {
    auto context = std::make_shared<Context>();
    context->set_fold(false);
    EXPECT_TRUE(Net(test::ParseNet(in_place), context).rewrites().empty());
    NetParameter param = test::ParseNet(in_place);
    param.set_debug_info(true);
    EXPECT_TRUE(Net(param).rewrites().empty());
  }
  // A net that runs forward only (its BatchNorm folds for inference instead).
  {
    NetParameter param = test::ParseNet(in_place);
    param.set_force_backward(false);
    param.mutable_layer()->RemoveLast();  // the loss
    param.mutable_state()->set_phase(TEST);
    Net net(param);
    EXPECT_TRUE(net.rewrites().empty());
  }
  // A Scale out of place (its input, the BatchNorm's top, stays a value of its own).
  {
    std::string text = in_place;
    const auto replace = [&](const std::string& from, const std::string& to) {
      ASSERT_NE(text.find(from), std::string::npos) << from;
      text.replace(text.find(from), from.size(), to);
    };
    replace("type: 'Scale' bottom: 'conv1' top: 'conv1'", "type: 'Scale' bottom: 'conv1' top: 'sc1'");
    replace("type: 'ReLU' bottom: 'conv1' top: 'conv1'", "type: 'ReLU' bottom: 'sc1' top: 'sc1'");
    replace("bottom: 'conv1' top: 'out'", "bottom: 'sc1' top: 'out'");
    EXPECT_TRUE(BuildUnit(text, true, "native")->rewrites().empty()) << text;
  }
  // A Scale of two bottoms (its scale is a value, not a parameter).
  {
    const std::string text = R"(
      name: 'two' force_backward: true
      layer { name: 'data' type: 'Input' top: 'data' top: 's'
              input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } shape { dim: 4 } } }
      layer { name: 'bn' type: 'BatchNorm' bottom: 'data' top: 'data' }
      layer { name: 'sc' type: 'Scale' bottom: 'data' bottom: 's' top: 'data' }
      layer { name: 'loss' type: 'EuclideanLoss' bottom: 'data' bottom: 'data' top: 'loss' }
    )";
    EXPECT_TRUE(Net(test::ParseNet(text)).rewrites().empty());
  }
}

}  // namespace
}  // namespace crema
