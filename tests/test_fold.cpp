// The inference rewrites (net/fold.hpp): where they fold and fuse, where they must not, that the folded net computes
// the unfolded net's outputs (values computed here by the unfolded net, whose layers have tests of their own), that
// weight files and the parameters users see stay the prototxt's, that folded weights follow edits, and that every
// engine with a fused activation computes the reference engine's result followed by the activation layer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#ifdef CREMA_USE_ONEDNN
#include <dnnl.hpp>
#endif

#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "layers/onednn_util.hpp"
#include "layers/vision/onednn_convolution.hpp"
#include "net/fold.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using test::ParseNet;

// A convolution without a bias, BatchNorm, Scale with a bias and ReLU, in place (as ResNet has them), then a
// second unit out of place (conv2 -> bn2 -> sc2 -> relu2), then an inner product with a BatchNorm, a Dropout and a
// TanH.
const char kNet[] = R"(
  name: 'folding'
  layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
  layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
          convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false } }
  layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }
  layer { name: 'sc1' type: 'Scale' bottom: 'conv1' top: 'conv1' scale_param { bias_term: true } }
  layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
  layer { name: 'conv2' type: 'Convolution' bottom: 'conv1' top: 'conv2'
          convolution_param { num_output: 6 kernel_size: 3 stride: 2 group: 2 } }
  layer { name: 'bn2' type: 'BatchNorm' bottom: 'conv2' top: 'bn2' }
  layer { name: 'sc2' type: 'Scale' bottom: 'bn2' top: 'sc2' scale_param { bias_term: true } }
  layer { name: 'relu2' type: 'ReLU' bottom: 'sc2' top: 'relu2' relu_param { negative_slope: 0.1 } }
  layer { name: 'fc' type: 'InnerProduct' bottom: 'relu2' top: 'fc'
          inner_product_param { num_output: 5 transpose: true } }
  layer { name: 'bnfc' type: 'BatchNorm' bottom: 'fc' top: 'fc' }
  layer { name: 'drop' type: 'Dropout' bottom: 'fc' top: 'drop' }
  layer { name: 'tanh' type: 'TanH' bottom: 'drop' top: 'out' }
)";

// Random weights and statistics: every BatchNorm's means and variances (the factor dividing them 2), every Scale's
// scale and bias, every convolution's and inner product's weights.
void Randomize(Net* net, uint64_t seed) {
  for (const auto& layer : net->layers()) {
    const std::string type = layer->type();
    if (type == "BatchNorm") {
      test::FillUniform(layer->params()[0].get(), -1.f, 1.f, seed++);
      test::FillUniform(layer->params()[1].get(), 0.5f, 4.f, seed++);
      layer->params()[2]->set_data(2.f);
    } else {
      for (const auto& blob : layer->params()) test::FillUniform(blob.get(), -0.5f, 1.f, seed++);
    }
  }
  for (Blob* input : net->input_blobs()) test::FillGaussian(input, 0.f, 1.f, seed++);
}

struct Built {
  std::unique_ptr<Net> net;
  std::vector<float> out;
};

// The net of `text`, forward only, with `prepare` run before the passes after the weights; its output after one pass.
Built Build(const std::string& text, bool fold, bool plan_memory = true,
            const std::function<void(Net*)>& prepare = nullptr) {
  NetParameter param = ParseNet(text);
  param.set_fold(fold);
  auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->set_plan_memory(plan_memory);
  Built built{std::make_unique<Net>(param, context), {}};
  Randomize(built.net.get(), 11);
  built.net->PlanMemory(false);
  if (prepare) prepare(built.net.get());
  built.net->RunAfterWeightsPasses();
  built.net->Forward();
  built.out = test::DataOf(*built.net->blob_by_name("out"));
  return built;
}

// Within `tolerance` of the largest magnitude: 1e-5 for a fold on the same engines (the folded weights round
// differently), more across engines that sum in other orders.
void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected, float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  float largest = 0.f;
  for (float v : expected) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.f);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tolerance * largest) << "at " << i;
}

std::vector<std::string> StepLayers(const Net& net) {
  std::vector<std::string> names;
  for (const PlanStep& step : net.plan()) names.push_back(net.layer_names()[step.layer]);
  return names;
}

TEST(FoldTest, BatchNormScaleAndActivationsFoldIntoTheProducersWithTheSameOutputs) {
  const Built unfolded = Build(kNet, false);
  const Built folded = Build(kNet, true);
  EXPECT_TRUE(unfolded.net->rewrites().empty());
  // The Dropout goes first; then the TanH reads the inner product's output and fuses into it.
  EXPECT_EQ(StepLayers(*folded.net), (std::vector<std::string>{"data", "conv1", "conv2", "fc"}));
  ASSERT_EQ(folded.net->rewrites().size(), 4u);
  EXPECT_EQ(folded.net->rewrites()[0], "drop (Dropout): removed, its forward pass copies its input");
  EXPECT_NE(folded.net->rewrites()[1].find("conv1 (Convolution): folded bn1 (BatchNorm), sc1 (Scale); fused relu1 "
                                           "(ReLU)"),
            std::string::npos)
      << folded.net->rewrites()[1];
  EXPECT_NE(folded.net->rewrites()[2].find("fused relu2 (ReLU(negative_slope 0.1))"), std::string::npos);
  EXPECT_NE(folded.net->rewrites()[3].find("fc (InnerProduct): folded bnfc (BatchNorm); fused tanh (TanH)"),
            std::string::npos);
  ExpectClose(folded.out, unfolded.out);
  // The rewritten layers stand for the prototxt's, whose parameters stay the user's.
  const Net& net = *folded.net;
  const int conv1 = net.plan()[1].layer;
  EXPECT_NE(net.rewrite_of(conv1), conv1);
  EXPECT_EQ(net.layer_by_name("conv1"), net.layers()[net.rewrite_of(conv1)].get());
  EXPECT_EQ(net.layer_by_name("conv1")->params().size(), 1u);  // still no bias
  EXPECT_EQ(net.layers()[conv1]->params().size(), 2u);         // the folded one has one
}

TEST(FoldTest, WeightFilesHoldTheUnfoldedLayersAndLoadIntoAFoldedNet) {
  const Built unfolded = Build(kNet, false);
  const Built folded = Build(kNet, true);
  NetParameter a, b;
  unfolded.net->ToProto(&a);
  folded.net->ToProto(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  // A folded net takes weights as the prototxt's layers have them, and derives its folded weights again.
  test::TempDir dir;
  const std::string weights = dir.file("w.caffemodel");
  WriteProtoToBinaryFile(a, weights);
  Built other = Build(kNet, true);
  ASSERT_FALSE(other.net->rewrites().empty());
  other.net->CopyTrainedLayersFrom(weights);
  other.net->Forward();
  ExpectClose(test::DataOf(*other.net->blob_by_name("out")), unfolded.out);
}

TEST(FoldTest, FoldedWeightsFollowEditsOfTheLayersParameters) {
  Built unfolded = Build(kNet, false);
  Built folded = Build(kNet, true);
  // As Python's net.params['bn1'][1].data[...] = v and net.params['conv2'][0].data[...] = w do.
  for (Net* net : {unfolded.net.get(), folded.net.get()}) {
    test::FillUniform(net->layer_by_name("bn1")->params()[1].get(), 1.f, 2.f, 99);
    test::FillUniform(net->layer_by_name("conv2")->params()[0].get(), -1.f, 1.f, 98);
    net->Forward();
  }
  const std::vector<float> expected = test::DataOf(*unfolded.net->blob_by_name("out"));
  EXPECT_GT(test::AbsSum(expected), 0.0);
  ExpectClose(test::DataOf(*folded.net->blob_by_name("out")), expected);
  float before = 0.f;
  for (size_t i = 0; i < expected.size(); ++i) before = std::max(before, std::abs(expected[i] - unfolded.out[i]));
  EXPECT_GT(before, 1e-3f);  // the edits changed the outputs
}

// A solver's test nets are rewritten over the weights they share with the training net, and derive their folded
// weights again after each update: every test gives the unfolded test net's outputs. BatchNorm learns its statistics
// in TRAIN and folds with them in TEST, so each update changes both the weights and the statistics the fold reads.
TEST(FoldTest, SolverTestNetsFoldOverTheTrainingNetsWeightsAfterEachUpdate) {
  const char kTrainTest[] = R"(
    name: 'solver_fold'
    layer { name: 'data' type: 'DummyData' top: 'data' top: 'target'
            dummy_data_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } shape { dim: 4 dim: 5 }
                               data_filler { type: 'gaussian' std: 1 } data_filler { type: 'uniform' } } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 4 kernel_size: 3 bias_term: false weight_filler { type: 'xavier' } } }
    layer { name: 'bn' type: 'BatchNorm' bottom: 'conv' top: 'conv' }
    layer { name: 'sc' type: 'Scale' bottom: 'conv' top: 'conv'
            scale_param { bias_term: true filler { type: 'uniform' min: 0.5 max: 1.5 } } }
    layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
    layer { name: 'drop' type: 'Dropout' bottom: 'conv' top: 'conv' }
    layer { name: 'fc' type: 'InnerProduct' bottom: 'conv' top: 'fc'
            inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'fc' bottom: 'target' top: 'loss' }
  )";
  SolverParameter param;
  ReadProtoFromText(
      "base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 max_iter: 6 test_iter: 2 test_interval: 2 "
      "test_initialization: false random_seed: 5 snapshot_after_train: false",
      "solver", &param);
  ReadProtoFromText(kTrainTest, "net", param.mutable_net_param());
  std::vector<std::vector<float>> losses[2];
  for (int fold = 0; fold < 2; ++fold) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, 5);
    context->set_fold(fold == 1);
    auto solver = CreateSolver(param, "", context);
    ASSERT_EQ(solver->test_nets().size(), 1u);
    const Net& test_net = *solver->test_nets()[0];
    if (fold) {
      // The Dropout goes, and conv takes bn, sc and relu.
      ASSERT_EQ(test_net.rewrites().size(), 2u);
      EXPECT_NE(test_net.rewrites()[1].find("conv (Convolution): folded bn (BatchNorm), sc (Scale); fused relu"),
                std::string::npos)
          << test_net.rewrites()[1];
    } else {
      EXPECT_TRUE(test_net.rewrites().empty());
    }
    for (int round = 0; round < 3; ++round) {
      solver->Step(2);
      losses[fold].emplace_back();
      const auto scores = solver->TestAll();
      for (const auto& mean : scores[0]) losses[fold].back().push_back(mean.value);
    }
  }
  ASSERT_EQ(losses[1].size(), 3u);
  for (size_t round = 0; round < 3; ++round) {
    ASSERT_EQ(losses[1][round].size(), 1u);
    EXPECT_NEAR(losses[1][round][0], losses[0][round][0], 1e-5f * std::abs(losses[0][round][0])) << "round " << round;
    // Training moved the test loss, so a fold over stale weights would have shown.
    if (round > 0) {
      EXPECT_GT(std::abs(losses[0][round][0] - losses[0][round - 1][0]), 1e-3f * losses[0][0][0]);
    }
  }
}

TEST(FoldTest, BlobsReadFromOutsideStopTheFoldsThatWouldLeaveThemUnwritten) {
  // Kept by name before the passes: conv2's output is read, so bn2 may not fold out of place; bn2's top too.
  const Built kept = Build(kNet, true, true, [](Net* net) { net->KeepBlobs({"conv2", "bn2"}); });
  EXPECT_EQ(StepLayers(*kept.net), (std::vector<std::string>{"data", "conv1", "conv2", "bn2", "sc2", "relu2", "fc"}));
  ExpectClose(kept.out, Build(kNet, false).out);
  // Without a memory plan every blob keeps its values for whoever reads them: only the in-place chains fold (and the
  // Dropout out of place stays).
  const Built unplanned = Build(kNet, true, false);
  EXPECT_EQ(StepLayers(*unplanned.net),
            (std::vector<std::string>{"data", "conv1", "conv2", "bn2", "sc2", "relu2", "fc", "drop", "tanh"}));
  // A blob folded away cannot be asked for afterwards.
  const Built folded = Build(kNet, true);
  test::ExpectErrorContaining([&] { folded.net->KeepBlobs({"bn2"}); },
                              {"blob 'bn2' is no longer computed", "fold: false"});
}

TEST(FoldTest, NetsThatRunBackwardOrSayNoAreNotRewritten) {
  // A net planned for backward (training, force_backward) keeps its plan, but for training's own fusion
  // (net/fuse.hpp: bn1 runs sc1 and relu1).
  NetParameter param = ParseNet(kNet);
  param.set_force_backward(true);
  Net backward(param);
  backward.RunAfterWeightsPasses();
  ASSERT_EQ(backward.rewrites().size(), 1u);
  EXPECT_EQ(backward.rewrites()[0],
            "bn1 (BatchNorm): runs sc1 (Scale) and relu1 (ReLU) in its own passes, for training");
  EXPECT_EQ(backward.plan().size(), 11u);
  // The context's setting (--fold=none).
  auto context = std::make_shared<Context>();
  context->set_fold(false);
  Net off(ParseNet(kNet), context);
  off.RunAfterWeightsPasses();
  EXPECT_TRUE(off.rewrites().empty());
  // A rewritten net refuses to be planned for backward, and its fused layers refuse a backward pass.
  const Built folded = Build(kNet, true);
  test::ExpectErrorContaining([&] { folded.net->PlanMemory(true); }, {"rewritten for inference", "fold: false"});
}

TEST(FoldTest, DeconvolutionsFoldPerOutputChannelWithGroups) {
  const char net[] = R"(
    layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 4 dim: 5 dim: 5 } } }
    layer { name: 'up' type: 'Deconvolution' bottom: 'data' top: 'up'
            convolution_param { num_output: 6 kernel_size: 3 stride: 2 group: 2 } }
    layer { name: 'bn' type: 'BatchNorm' bottom: 'up' top: 'up' }
    layer { name: 'bias' type: 'Bias' bottom: 'up' top: 'up' }
    layer { name: 'elu' type: 'ELU' bottom: 'up' top: 'out' elu_param { alpha: 0.5 } }
  )";
  const Built folded = Build(net, true);
  EXPECT_EQ(StepLayers(*folded.net), (std::vector<std::string>{"data", "up"}));
  ExpectClose(folded.out, Build(net, false).out);
}

// ResNet's shortcut: a sum whose other operand is already computed fuses into the producer of the last operand, with
// the ReLU after it; where the other operand comes later, the later producer takes the sum.
TEST(FoldTest, SumsWithAnOperandComputedBeforeFuseIntoTheProducer) {
  const char net[] = R"(
    layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 4 dim: 6 dim: 6 } } }
    layer { name: 'a' type: 'Convolution' bottom: 'data' top: 'a'
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false } }
    layer { name: 'a_bn' type: 'BatchNorm' bottom: 'a' top: 'a' }
    layer { name: 'a_relu' type: 'ReLU' bottom: 'a' top: 'a' }
    layer { name: 'b' type: 'Convolution' bottom: 'a' top: 'b' convolution_param { num_output: 8 kernel_size: 1 } }
    layer { name: 'b_bn' type: 'BatchNorm' bottom: 'b' top: 'b' }
    layer { name: 'c' type: 'Convolution' bottom: 'a' top: 'c' convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
    layer { name: 'sum1' type: 'Eltwise' bottom: 'b' bottom: 'a' top: 'sum1' }
    layer { name: 'sum1_relu' type: 'ReLU' bottom: 'sum1' top: 'sum1' }
    layer { name: 'sum2' type: 'Eltwise' bottom: 'sum1' bottom: 'c' top: 'sum2' eltwise_param { coeff: 1 coeff: 1 } }
    layer { name: 'out' type: 'Sigmoid' bottom: 'sum2' top: 'out' }
  )";
  const Built folded = Build(net, true);
  // b: the BatchNorm, then the sum with 'a' (computed before b) and the ReLU. c: the sum with sum1 (which b now
  // writes, before c) and the Sigmoid.
  EXPECT_EQ(StepLayers(*folded.net), (std::vector<std::string>{"data", "a", "b", "c"}));
  std::string notes;
  for (const std::string& note : folded.net->rewrites()) notes += note + "\n";
  EXPECT_NE(notes.find("b (Convolution): folded b_bn (BatchNorm); fused sum1 (sum with 'a'); fused sum1_relu (ReLU)"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("c (Convolution): fused sum2 (sum with 'sum1'); fused out (Sigmoid)"), std::string::npos)
      << notes;
  ExpectClose(folded.out, Build(net, false).out);
  // A sum with coefficients other than 1 is no plain sum, and stays.
  std::string scaled = net;
  scaled.replace(scaled.find("coeff: 1 coeff: 1"), 17, "coeff: 1 coeff: 2");
  const Built kept = Build(scaled, true);
  EXPECT_EQ(StepLayers(*kept.net), (std::vector<std::string>{"data", "a", "b", "c", "sum2", "out"}));
  ExpectClose(kept.out, Build(scaled, false).out);
}

// Every engine of Convolution, Deconvolution and InnerProduct, with every activation fused, with and without a sum
// before it, against the reference engine followed by the Eltwise and activation layers.
TEST(FoldTest, EveryEngineWithAFusedActivationMatchesTheReferenceAndTheActivationLayer) {
  struct Producer {
    const char* type;
    const char* params;
  };
  const std::vector<Producer> producers = {
      {"Convolution", "convolution_param { num_output: 12 kernel_size: 3 pad: 1 }"},
      {"Convolution", "convolution_param { num_output: 16 kernel_size: 1 group: 2 }"},
      {"Deconvolution", "convolution_param { num_output: 5 kernel_size: 2 stride: 2 }"},
      {"InnerProduct", "inner_product_param { num_output: 7 }"},
      // Weights of 1 MiB and more: oneDNN's inner product over its own layout of them, in a net that runs forward only.
      {"InnerProduct", "inner_product_param { num_output: 1024 }"},
      {"InnerProduct", "inner_product_param { num_output: 1024 transpose: true }"}};
  const std::vector<std::string> activations = {"type: 'ReLU'",
                                                "type: 'ReLU' relu_param { negative_slope: 0.2 }",
                                                "type: 'ELU' elu_param { alpha: 0.7 }",
                                                "type: 'Sigmoid'",
                                                "type: 'TanH'",
                                                "type: 'Clip' clip_param { min: -0.3 max: 0.4 }"};
  int compared = 0;
  for (const Producer& producer : producers) {
    for (const std::string& engine : LayerRegistry::Global().Engines(producer.type, Device::kCPU)) {
      for (const std::string& activation : activations) {
        for (const bool sum : {false, true}) {
          SCOPED_TRACE(std::string(producer.type) + " " + producer.params + ", engine " + engine + ", " + activation +
                       (sum ? ", after a sum" : ""));
          // With a sum, q computes its other operand first (the same layer as p, on the same input).
          const std::string layer = std::string("' type: '") + producer.type + "' bottom: 'data' " + producer.params;
          const std::string text =
              std::string("layer { name: 'data' type: 'Input' top: 'data' ") +
              "input_param { shape { dim: 2 dim: 8 dim: 6 dim: 6 } } }\n" +
              (sum ? "layer { name: 'q" + layer + " top: 'q' }\n" : "") + "layer { name: 'p" + layer + " top: 'p' }\n" +
              (sum ? "layer { name: 's' type: 'Eltwise' bottom: 'p' bottom: 'q' top: 's' }\n" : "") +
              "layer { name: 'a' " + activation + (sum ? " bottom: 's'" : " bottom: 'p'") + " top: 'out' }";
          // Unfolded, a sum adds q, the Split of 'data' and the Eltwise; folded, the Split goes too.
          const size_t steps = sum ? 6 : 3, folded_steps = sum ? 3 : 2;
          const auto run = [&](const std::string& forced, bool fold) {
            NetParameter param = ParseNet(text);
            param.set_fold(fold);
            auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
            context->force_engine(producer.type, forced);
            Net net(param, context);
            Randomize(&net, 21);
            net.RunAfterWeightsPasses();
            EXPECT_EQ(net.plan().size(), fold ? folded_steps : steps);
            for (const PlanStep& step : net.plan()) {
              if (net.layers()[step.layer]->type() == std::string(producer.type)) {
                EXPECT_EQ(net.layers()[step.layer]->engine(), forced);
              }
            }
            net.Forward();
            return test::DataOf(*net.blob_by_name("out"));
          };
          const std::string reference = LayerRegistry::Global().Engines(producer.type, Device::kCPU).back();
          // Another engine sums in another order: oneDNN's over 288 inputs differs from the reference by up to 2e-5
          // of a clipped output's largest value (0.4).
          ExpectClose(run(engine, true), run(reference, false), 1e-4f);
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, 6 * 2 * 6 * 2);  // at least two engines of each
}

// On the GPU the rewritten net computes the CPU's outputs: cuDNN's convolution adds the fused sum itself (in the
// summand's memory where the plan put it there) and computes the fused ReLU with the bias in one call.
TEST(FoldTest, TheFoldedNetOnTheGpuGivesTheCpusOutputs) {
  CREMA_SKIP_WITHOUT_GPU();
  const std::string text = R"(
    layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 16 dim: 10 dim: 10 } } }
    layer { name: 'c0' type: 'Convolution' bottom: 'data' top: 'a'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false } }
    layer { name: 'bn0' type: 'BatchNorm' bottom: 'a' top: 'a' }
    layer { name: 'sc0' type: 'Scale' bottom: 'a' top: 'a' scale_param { bias_term: true } }
    layer { name: 'r0' type: 'ReLU' bottom: 'a' top: 'a' }
    layer { name: 'c1' type: 'Convolution' bottom: 'a' top: 'b' convolution_param { num_output: 16 kernel_size: 1 } }
    layer { name: 'r1' type: 'ReLU' bottom: 'b' top: 'b' relu_param { negative_slope: 0.1 } }
    layer { name: 'c2' type: 'Convolution' bottom: 'b' top: 'c' convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'c' bottom: 'a' top: 's' }
    layer { name: 'r2' type: 'ReLU' bottom: 's' top: 's' }
    layer { name: 'pool' type: 'Pooling' bottom: 's' top: 'out' pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  )";
  const auto run = [&](Device device) {
    NetParameter param = ParseNet(text);
    auto context = std::make_shared<Context>(device, 0, 7);
    Net net(param, context);
    Randomize(&net, 3);
    net.PlanMemory(false);
    net.RunAfterWeightsPasses();
    EXPECT_GE(net.rewrites().size(), 3u);  // c0, c1 and c2 (and the Split of a)
    net.Forward();
    return test::DataOf(*net.blob_by_name("out"));
  };
  ExpectClose(run(Device::kGPU), run(Device::kCPU), 1e-4f);
}

#ifdef CREMA_USE_ONEDNN
// In a net that runs forward only, oneDNN's engine may compute 3x3 convolutions of stride 1 by Winograd's minimal
// filtering (where oneDNN has it for the CPU: AVX-512), with the fused sum and ReLU; and a fused sum whose summand dies
// there writes its output into the summand's memory, unless the convolution also reads the summand as its input.
// Either way the outputs are the reference engine's, unfolded (within rounding: Winograd's transforms and another
// summation order).
TEST(FoldTest, WinogradConvolutionsAndSumsInTheSummandsMemoryMatchTheReference) {
  // Winograd wherever oneDNN has it (by default only where it measures faster, which a test cannot rely on).
  const test::ScopedEnvironment always("CREMA_ONEDNN_WINOGRAD", "1");
  for (const bool summand_is_input : {false, true}) {
    SCOPED_TRACE(summand_is_input ? "the convolution reads the summand" : "ResNet's shortcut");
    const std::string text = std::string(R"(
      layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 32 dim: 12 dim: 12 } } }
      layer { name: 'c0' type: 'Convolution' bottom: 'data' top: 'a' convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
      layer { name: 'r0' type: 'ReLU' bottom: 'a' top: 'a' }
      layer { name: 'c1' type: 'Convolution' bottom: 'a' top: 'b' convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
      layer { name: 'r1' type: 'ReLU' bottom: 'b' top: 'b' }
      layer { name: 'c2' type: 'Convolution' bottom: ')") +
                             (summand_is_input ? "a" : "b") + R"(' top: 'c'
              convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
      layer { name: 'sum' type: 'Eltwise' bottom: 'c' bottom: 'a' top: 's' }
      layer { name: 'r2' type: 'ReLU' bottom: 's' top: 's' }
      layer { name: 'pool' type: 'Pooling' bottom: 's' top: 'out' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    )";
    const std::string reference = LayerRegistry::Global().Engines("Convolution", Device::kCPU).back();
    const auto run = [&](const std::string& engine, bool fold) {
      NetParameter param = ParseNet(text);
      param.set_fold(fold);
      auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
      context->force_engine("Convolution", engine);
      Built built{std::make_unique<Net>(param, context), {}};
      Randomize(built.net.get(), 5);
      built.net->PlanMemory(false);
      built.net->RunAfterWeightsPasses();
      built.net->Forward();
      built.out = test::DataOf(*built.net->blob_by_name("out"));
      return built;
    };
    const Built folded = run("onednn", true);
    const Built unfolded = run(reference, false);
    ExpectClose(folded.out, unfolded.out, 1e-4f);
    const Net& net = *folded.net;
    const PlanStep* fused = nullptr;
    for (const PlanStep& step : net.plan())
      if (net.layer_names()[net.rewrite_of(step.layer)] == "c2") fused = &step;
    ASSERT_NE(fused, nullptr);
    ASSERT_EQ(fused->bottoms.size(), 2u);  // the input and the summand 'a'
    EXPECT_EQ(net.blob_names()[fused->bottoms[1]], "a");
    const Blob& summand = *net.blobs()[fused->bottoms[1]];
    const Blob& output = *net.blobs()[fused->tops[0]];
    EXPECT_EQ(summand.cpu_data() == output.cpu_data(), !summand_is_input);
    const auto* layer = dynamic_cast<const OneDnnConvolutionLayer*>(net.layers()[fused->layer].get());
    ASSERT_NE(layer, nullptr);
    if (onednn::EffectiveIsaHas(dnnl::cpu_isa::avx512_core)) {
      EXPECT_NE(layer->implementation().find("wino"), std::string::npos) << layer->implementation();
    }
  }
}
#endif

}  // namespace
}  // namespace crema
