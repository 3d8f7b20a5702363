#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "net/passes.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using test::ParseNet;

// data (4 x 5) -> ip1 (3) -> relu (in place) -> ip2 (2) -> loss with label; data also feeds ip3 -> a second
// loss, so `data` is read twice and gets a Split layer.
const char kBranchyNet[] = R"(
name: 'branchy'
layer { name: 'input' type: 'Input' top: 'data' top: 'label'
        input_param { shape { dim: 4 dim: 5 } shape { dim: 4 } } }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'ip1'
        inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.5 }
                              bias_filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'relu' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
        inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'ip3' type: 'InnerProduct' bottom: 'data' top: 'ip3'
        inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
layer { name: 'loss3' type: 'SoftmaxWithLoss' bottom: 'ip3' bottom: 'label' top: 'loss3' loss_weight: 0.5 }
)";

void FillInputs(Net* net) {
  test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, 7);
  float* label = net->blob_by_name("label")->mutable_cpu_data();
  for (int i = 0; i < 4; ++i) label[i] = static_cast<float>(i % 2);
}

TEST(NetStateRuleTest, MatchesPhaseLevelAndStages) {
  NetState state;
  state.set_phase(TRAIN);
  state.set_level(2);
  state.add_stage("deploy");
  NetStateRule rule;
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.set_phase(TEST);
  EXPECT_FALSE(StateMeetsRule(state, rule));
  rule.set_phase(TRAIN);
  rule.set_min_level(3);
  EXPECT_FALSE(StateMeetsRule(state, rule));
  rule.set_min_level(1);
  rule.set_max_level(2);
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.add_stage("deploy");
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.add_stage("extra");
  EXPECT_FALSE(StateMeetsRule(state, rule));
  rule.clear_stage();
  rule.add_not_stage("deploy");
  EXPECT_FALSE(StateMeetsRule(state, rule));
}

TEST(NetFilterTest, KeepsLayersByIncludeAndExclude) {
  NetParameter param = ParseNet(R"(
    state { phase: TEST stage: 'val' }
    layer { name: 'train_only' type: 'Input' include { phase: TRAIN } }
    layer { name: 'test_only' type: 'Input' include { phase: TEST } }
    layer { name: 'either' type: 'Input' include { phase: TRAIN } include { stage: 'val' } }
    layer { name: 'not_val' type: 'Input' exclude { stage: 'val' } }
    layer { name: 'always' type: 'Input' })");
  NetParameter filtered = FilterNet(param);
  std::vector<std::string> names;
  for (const auto& layer : filtered.layer()) names.push_back(layer.name());
  EXPECT_EQ(names, (std::vector<std::string>{"test_only", "either", "always"}));
  param.mutable_layer(0)->add_exclude()->set_phase(TEST);
  EXPECT_NE(test::ErrorMessage([&] { FilterNet(param); }).find("train_only"), std::string::npos);
}

TEST(NetSplitTest, InsertsSplitForSharedBlobAndRenamesReaders) {
  NetParameter split = InsertSplits(ParseNet(kBranchyNet));
  std::vector<std::string> names;
  for (const auto& layer : split.layer()) names.push_back(layer.name());
  // 'data' and 'label' each feed two layers.
  ASSERT_EQ(names, (std::vector<std::string>{"input", "data_input_0_split", "label_input_1_split", "ip1", "relu",
                                             "ip2", "ip3", "loss", "loss3"}));
  const LayerParameter& data_split = split.layer(1);
  EXPECT_EQ(data_split.type(), "Split");
  ASSERT_EQ(data_split.top_size(), 2);
  EXPECT_EQ(split.layer(3).bottom(0), data_split.top(0));  // ip1 reads copy 0
  EXPECT_EQ(split.layer(6).bottom(0), data_split.top(1));  // ip3 reads copy 1
  // The in-place ReLU keeps its blob name: only one reader of ip1's first version.
  EXPECT_EQ(split.layer(4).bottom(0), "ip1");
  EXPECT_EQ(split.layer(4).top(0), "ip1");
}

TEST(NetSplitTest, MissingBottomNamesLayerAndBlob) {
  const std::string message = test::ErrorMessage(
      [] { InsertSplits(ParseNet("layer { name: 'relu' type: 'ReLU' bottom: 'nothing' top: 'r' }")); });
  EXPECT_NE(message.find("relu"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing"), std::string::npos) << message;
}

// Step timing (the training monitor's per-layer breakdown): off, nothing is kept; on, every step's forward and, where
// it runs backward, its backward take time; turning it on again starts from zero.
TEST(NetTest, StepTimingMeasuresEachStepWhileOn) {
  Net net(ParseNet(test::SmallNet()));
  net.ForwardBackward();
  EXPECT_TRUE(net.step_times().empty());
  net.set_step_timing(true);
  net.ForwardBackward();
  net.set_step_timing(false);
  ASSERT_EQ(net.step_times().size(), net.plan().size());
  for (size_t s = 0; s < net.plan().size(); ++s) {
    EXPECT_GT(net.step_times()[s].forward_ms, 0) << net.layer_names()[net.plan()[s].layer];
    EXPECT_EQ(net.step_times()[s].backward_ms > 0, net.plan()[s].needs_backward)
        << net.layer_names()[net.plan()[s].layer];
  }
  const std::vector<Net::StepTimes> first = net.step_times();
  net.ForwardBackward();  // off: the figures stay
  EXPECT_EQ(net.step_times()[0].forward_ms, first[0].forward_ms);
  net.set_step_timing(true);
  EXPECT_EQ(net.step_times()[0].forward_ms, 0);
}

TEST(NetTest, BuildsPlanWithSplitsInPlaceAndOutputs) {
  Net net(ParseNet(kBranchyNet));
  EXPECT_TRUE(net.has_layer("data_input_0_split"));
  EXPECT_EQ(net.blob_by_name("ip2")->shape(), (std::vector<int>{4, 2}));
  // In place: relu's top is ip1's blob.
  const auto relu_it = std::find_if(net.plan().begin(), net.plan().end(),
                                    [&](const PlanStep& s) { return net.layer_names()[s.layer] == "relu"; });
  ASSERT_NE(relu_it, net.plan().end());
  const PlanStep& relu = *relu_it;
  EXPECT_EQ(relu.bottoms, relu.tops);
  std::vector<std::string> outputs;
  for (int id : net.output_blob_indices()) outputs.push_back(net.blob_names()[id]);
  EXPECT_EQ(outputs, (std::vector<std::string>{"loss", "loss3"}));
  EXPECT_FLOAT_EQ(net.blob_loss_weight(net.output_blob_indices()[1]), 0.5f);
  EXPECT_EQ(net.learnable_params().size(), 6u);  // weights and biases of ip1, ip2, ip3
}

// The whole net's analytic gradient (Backward) against central differences of its loss (Forward), for every
// parameter: this checks splits (gradient sums), in-place steps and loss weights together.
TEST(NetTest, BackwardMatchesNumericGradientOfLoss) {
  Net net(ParseNet(kBranchyNet));
  FillInputs(&net);
  net.ClearParamDiffs();
  net.ForwardBackward();
  const float step = 1e-2f;
  for (Blob* param : net.learnable_params()) {
    std::vector<float> analytic(param->cpu_diff(), param->cpu_diff() + param->count());
    for (int i = 0; i < param->count(); ++i) {
      const float original = param->cpu_data()[i];
      param->mutable_cpu_data()[i] = original + step;
      const double plus = net.Forward();
      param->mutable_cpu_data()[i] = original - step;
      const double minus = net.Forward();
      param->mutable_cpu_data()[i] = original;
      const double numeric = (plus - minus) / (2 * step);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 * std::max(1.0, std::fabs(numeric))) << "param element " << i;
    }
  }
}

// Net::ClearParamDiffsInBackward leaves the zeroing of a gradient its layer alone writes (an InnerProduct's, learning)
// to that layer's backward, which then writes it rather than adding to it: the gradients afterwards are those of a net
// whose gradients were zeroed (over stale values in them, which must not show); a shared parameter's gradient (summed
// over its layers) and a frozen one (lr_mult 0, no backward writes it) are zeroed at once; a second backward adds; and
// ZeroPendingParamDiffs, and ClearParamDiffs (which zeroes every gradient at once), zero what no backward wrote.
TEST(NetTest, ClearParamDiffsInBackwardLeavesAGradientItsLayerWritesToItsBackward) {
  const char text[] = R"(
    layer { name: 'input' type: 'Input' top: 'a' top: 'b' top: 'label'
            input_param { shape { dim: 4 dim: 6 } shape { dim: 4 dim: 6 } shape { dim: 4 } } }
    layer { name: 'ipa' type: 'InnerProduct' bottom: 'a' top: 'ya' param { name: 'shared_w' }
            inner_product_param { num_output: 3 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'ipb' type: 'InnerProduct' bottom: 'b' top: 'yb' param { name: 'shared_w' }
            inner_product_param { num_output: 3 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'ya' bottom: 'yb' top: 'y' }
    layer { name: 'own' type: 'InnerProduct' bottom: 'y' top: 'z'
            inner_product_param { num_output: 5 weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } } }
    layer { name: 'frozen' type: 'InnerProduct' bottom: 'z' top: 'scores' param { lr_mult: 0 } param { lr_mult: 0 }
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'scores' bottom: 'label' top: 'loss' }
  )";
  Net lazy(ParseNet(text)), eager(ParseNet(text));
  ASSERT_EQ(lazy.learnable_params().size(), 5u);
  for (size_t i = 0; i < lazy.learnable_params().size(); ++i) {
    const Blob& from = *lazy.learnable_params()[i];
    std::copy(from.cpu_data(), from.cpu_data() + from.count(), eager.learnable_params()[i]->mutable_cpu_data());
  }
  for (Net* net : {&lazy, &eager}) {
    test::FillGaussian(net->blob_by_name("a"), 0, 1, 1);
    test::FillGaussian(net->blob_by_name("b"), 0, 1, 2);
    float* label = net->blob_by_name("label")->mutable_cpu_data();
    for (int i = 0; i < 4; ++i) label[i] = static_cast<float>(i % 3);
    for (Blob* param : net->learnable_params()) param->set_diff(7.f);  // a last iteration's gradients
  }
  Layer& own = *lazy.layer_by_name("own");
  lazy.ClearParamDiffsInBackward();
  EXPECT_TRUE(own.param_gradient_zero_pending(0));
  EXPECT_TRUE(own.param_gradient_zero_pending(1));
  EXPECT_EQ(own.params()[0]->cpu_diff()[0], 7.f);  // left for the backward
  for (const char* name : {"ipa", "frozen"}) {
    const Blob& weights = *lazy.layer_by_name(name)->params()[0];
    EXPECT_EQ(*std::max_element(weights.cpu_diff(), weights.cpu_diff() + weights.count()), 0.f) << name;
  }
  for (Blob* param : eager.learnable_params()) param->set_diff(0.f);
  const auto compare = [&](const char* when) {
    for (size_t i = 0; i < lazy.learnable_params().size(); ++i) {
      const Blob& a = *lazy.learnable_params()[i];
      const Blob& b = *eager.learnable_params()[i];
      for (int k = 0; k < a.count(); ++k)
        ASSERT_EQ(a.cpu_diff()[k], b.cpu_diff()[k]) << when << ": parameter " << i << ", value " << k;
    }
  };
  lazy.ForwardBackward();
  eager.ForwardBackward();
  EXPECT_FALSE(own.param_gradient_zero_pending(0));
  compare("one backward");
  double written = 0;
  for (int k = 0; k < own.params()[0]->count(); ++k) written += std::fabs(own.params()[0]->cpu_diff()[k]);
  EXPECT_GT(written, 0.0);
  lazy.ForwardBackward();  // adds, as Caffe's iter_size passes do
  eager.ForwardBackward();
  compare("two backwards");

  for (const bool by_clear : {false, true}) {
    for (Blob* param : lazy.learnable_params()) param->set_diff(7.f);
    lazy.ClearParamDiffsInBackward();
    EXPECT_TRUE(own.param_gradient_zero_pending(0));
    if (by_clear) {
      lazy.ClearParamDiffs();
    } else {
      lazy.ZeroPendingParamDiffs();
    }
    EXPECT_FALSE(own.param_gradient_zero_pending(0));
    for (Blob* param : lazy.learnable_params())
      EXPECT_EQ(*std::max_element(param->cpu_diff(), param->cpu_diff() + param->count()), 0.f) << by_clear;
  }
}

TEST(NetTest, SharedParametersAreOneBlobWithSummedGradient) {
  const char text[] = R"(
    layer { name: 'input' type: 'Input' top: 'a' top: 'b' top: 'label'
            input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: 'ipa' type: 'InnerProduct' bottom: 'a' top: 'ya' param { name: 'shared_w' }
            inner_product_param { num_output: 2 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'ipb' type: 'InnerProduct' bottom: 'b' top: 'yb' param { name: 'shared_w' }
            inner_product_param { num_output: 2 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'la' type: 'SoftmaxWithLoss' bottom: 'ya' bottom: 'label' top: 'la' }
    layer { name: 'lb' type: 'SoftmaxWithLoss' bottom: 'yb' bottom: 'label' top: 'lb' }
  )";
  Net net(ParseNet(text));
  ASSERT_EQ(net.learnable_params().size(), 1u);
  Blob* wa = net.layer_by_name("ipa")->params()[0].get();
  Blob* wb = net.layer_by_name("ipb")->params()[0].get();
  EXPECT_EQ(wa->cpu_data(), wb->cpu_data());  // same memory
  test::FillGaussian(net.blob_by_name("a"), 0, 1, 1);
  test::FillGaussian(net.blob_by_name("b"), 0, 1, 2);
  net.blob_by_name("label")->mutable_cpu_data()[1] = 1.f;
  net.ClearParamDiffs();
  net.ForwardBackward();
  std::vector<float> both(wa->cpu_diff(), wa->cpu_diff() + wa->count());
  // With ipb's input zeroed its gradient contribution vanishes: the difference is ipb's share.
  net.blob_by_name("b")->set_data(0.f);
  net.ClearParamDiffs();
  net.ForwardBackward();
  double changed = 0;
  for (int i = 0; i < wa->count(); ++i) changed += std::fabs(both[i] - wa->cpu_diff()[i]);
  EXPECT_GT(changed, 1e-4);

  NetParameter bad = ParseNet(text);
  bad.mutable_layer(2)->mutable_inner_product_param()->set_num_output(3);
  bad.mutable_layer(2)->clear_bottom();
  bad.mutable_layer(2)->add_bottom("b");
  const std::string message = test::ErrorMessage([&] { Net net2(bad); });
  EXPECT_NE(message.find("shared_w"), std::string::npos) << message;

  // Multipliers as Caffe reads them: the first explicit value sets the shared parameter's; a default (unset) one
  // never contradicts it, two explicit ones that differ do.
  NetParameter later_explicit = ParseNet(text);
  later_explicit.mutable_layer(2)->mutable_param(0)->set_lr_mult(2.f);
  later_explicit.mutable_layer(2)->mutable_param(0)->set_decay_mult(0.5f);
  Net shared(later_explicit);
  ASSERT_EQ(shared.params_lr().size(), 1u);
  EXPECT_EQ(shared.params_lr()[0], 2.f);
  EXPECT_EQ(shared.params_weight_decay()[0], 0.5f);
  NetParameter contradicting = later_explicit;
  contradicting.mutable_layer(1)->mutable_param(0)->set_lr_mult(3.f);
  const std::string contradiction = test::ErrorMessage([&] { Net net3(contradicting); });
  EXPECT_NE(contradiction.find("sets lr_mult 2 where an earlier user (its owner is 'ipa') sets 3"), std::string::npos)
      << contradiction;
}

TEST(NetTest, BackwardIsSkippedWhereNothingLearnsOrNeedsIt) {
  NetParameter param = ParseNet(kBranchyNet);
  // Freeze ip3: nothing below it learns, and its input is data, so it needs no backward.
  param.mutable_layer(4)->add_param()->set_lr_mult(0);
  param.mutable_layer(4)->add_param()->set_lr_mult(0);
  Net net(param);
  for (const auto& step : net.plan()) {
    const std::string& name = net.layer_names()[step.layer];
    if (name == "ip3" || name == "input" || name.find("split") != std::string::npos) {
      EXPECT_FALSE(step.needs_backward) << name;
    }
    if (name == "ip1" || name == "ip2" || name == "loss") {
      EXPECT_TRUE(step.needs_backward) << name;
    }
  }
  EXPECT_EQ(net.learnable_params().size(), 6u);
  param.set_force_backward(true);
  Net forced(param);
  for (const auto& step : forced.plan()) {
    if (forced.layer_names()[step.layer] == "ip3") {
      EXPECT_TRUE(step.needs_backward);
    }
  }
}

TEST(NetTest, PropagateDownFalseCutsTheLayersBelowOffTheLoss) {
  NetParameter param = ParseNet(kBranchyNet);
  param.mutable_layer(3)->add_propagate_down(false);  // ip2 sends no gradient to ip1
  Net net(param);
  for (const auto& step : net.plan()) {
    const std::string& name = net.layer_names()[step.layer];
    if (name == "ip1" || name == "relu") {
      EXPECT_FALSE(step.needs_backward) << name;
    }
    if (name == "ip2" || name == "ip3") {
      EXPECT_TRUE(step.needs_backward) << name;
    }
  }
  FillInputs(&net);
  net.ClearParamDiffs();
  net.ForwardBackward();
  EXPECT_EQ(test::AbsSum(test::DiffOf(*net.layer_by_name("ip1")->params()[0])), 0.0);
  EXPECT_GT(test::AbsSum(test::DiffOf(*net.layer_by_name("ip2")->params()[0])), 0.0);
  EXPECT_GT(test::AbsSum(test::DiffOf(*net.layer_by_name("ip3")->params()[0])), 0.0);
}

TEST(NetTest, WeightsRoundTripThroughProtoAndShapeMismatchIsNamed) {
  Net source(ParseNet(kBranchyNet));
  FillInputs(&source);
  const float loss = source.Forward();
  NetParameter weights;
  source.ToProto(&weights);
  for (const auto& layer : weights.layer()) EXPECT_EQ(layer.type() == "Split", false);
  // The copy starts from other random weights.
  Net copy(ParseNet(kBranchyNet), std::make_shared<Context>(Device::kCPU, 0, 99));
  FillInputs(&copy);
  EXPECT_NE(copy.Forward(), loss);
  copy.CopyTrainedLayersFrom(weights);
  EXPECT_FLOAT_EQ(copy.Forward(), loss);

  weights.mutable_layer(1)->mutable_blobs(0)->mutable_shape()->set_dim(0, 7);
  const std::string message = test::ErrorMessage([&] { copy.CopyTrainedLayersFrom(weights); });
  EXPECT_NE(message.find("ip1"), std::string::npos) << message;
  EXPECT_NE(message.find("7 5"), std::string::npos) << message;
  EXPECT_NE(message.find("3 5"), std::string::npos) << message;
}

// Caffe's V1 `layers` (field 2) are read and upgraded now (tests/test_upgrade_proto.cpp): a binary NetParameter
// whose only content is one empty V1 layer holds no weights, which is an error naming the file (weights that
// reach no layer would leave the net on its fillers), not a parse failure.
TEST(NetErrorsTest, LegacyV1FilesAreUpgradedNotIgnored) {
  test::TempDir dir;
  const std::string path = dir.file("v1.caffemodel");
  WriteStringToFileAtomically(std::string("\x12\x00", 2), path);
  Net net(ParseNet(kBranchyNet));
  test::ExpectErrorContaining([&] { net.CopyTrainedLayersFrom(path); },
                              {"v1.caffemodel", "holds no weights at all", "ip1"});
  const NetParameter v1 = ParseNet("layers { name: 'conv1' type: CONVOLUTION }");
  ASSERT_EQ(v1.layers_size(), 1);
  EXPECT_EQ(v1.layers(0).type(), V1LayerParameter::CONVOLUTION);
}

TEST(NetErrorsTest, UnknownTypeListsKnownTypes) {
  const std::string message =
      test::ErrorMessage([] { Net net(ParseNet("layer { name: 'x' type: 'Convolutoin' top: 'y' }")); });
  EXPECT_NE(message.find("Convolutoin"), std::string::npos) << message;
  EXPECT_NE(message.find("Convolution, "), std::string::npos) << message;
  EXPECT_NE(message.find("InnerProduct"), std::string::npos) << message;
}

TEST(NetErrorsTest, IncompatibleShapesNameLayerAndShapes) {
  const std::string message = test::ErrorMessage([] {
    Net net(ParseNet(R"(
      layer { name: 'input' type: 'Input' top: 'scores' top: 'label'
              input_param { shape { dim: 4 dim: 10 } shape { dim: 3 } } }
      layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'scores' bottom: 'label' top: 'loss' })"));
  });
  EXPECT_NE(message.find("loss"), std::string::npos) << message;
  EXPECT_NE(message.find("4 10"), std::string::npos) << message;
  EXPECT_NE(message.find("3 (3)"), std::string::npos) << message;
}

TEST(NetErrorsTest, TopWrittenTwiceAndBadInPlaceAreNamed) {
  std::string message = test::ErrorMessage([] {
    Net net(ParseNet(R"(
      layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'data' inner_product_param { num_output: 3 } })"));
  });
  EXPECT_NE(message.find("'ip'"), std::string::npos) << message;
  EXPECT_NE(message.find("in place"), std::string::npos) << message;
  message = test::ErrorMessage([] {
    Net net(ParseNet(R"(
      layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
      layer { name: 'other' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } })"));
  });
  EXPECT_NE(message.find("other"), std::string::npos) << message;
}

// BVLC's MNIST autoencoder names two layers "loss": Caffe builds it, and so does crema, with a warning naming both.
// The name then means the one that holds parameters (weights files find layers by name).
TEST(NetTest, TwoLayersOfOneNameAreAcceptedWithAWarning) {
  test::LoggedWarnings warnings;
  Net net(ParseNet(R"(
    name: 'autoencoder'
    layer { name: 'data' type: 'DummyData' top: 'data' dummy_data_param { shape { dim: 3 dim: 6 }
            data_filler { type: 'uniform' min: 0 max: 1 } } }
    layer { name: 'code' type: 'InnerProduct' bottom: 'data' top: 'decode'
            inner_product_param { num_output: 6 weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'loss' type: 'SigmoidCrossEntropyLoss' bottom: 'decode' bottom: 'data' top: 'cross_entropy' }
    layer { name: 'neuron' type: 'Sigmoid' bottom: 'decode' top: 'decode_neuron' }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'decode_neuron' bottom: 'data' top: 'l2_error'
            loss_weight: 0 }
    layer { name: 'code' type: 'Silence' bottom: 'l2_error' })"));
  std::vector<std::string> named;
  for (const auto& line : warnings.lines())
    if (line.find("two layers are named") != std::string::npos) named.push_back(line);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_NE(named[0].find("net 'autoencoder': two layers are named 'loss' (SigmoidCrossEntropyLoss, then "
                          "EuclideanLoss); accepted as Caffe does"),
            std::string::npos)
      << named[0];
  EXPECT_EQ(named[0].find("weights"), std::string::npos) << named[0];
  EXPECT_NE(named[1].find("'code' (InnerProduct, then Silence)"), std::string::npos) << named[1];
  EXPECT_NE(named[1].find("weights and saved state of that name go to the earlier one"), std::string::npos)
      << named[1];
  // Both run: the cross entropy is the loss, the Euclidean error (weight 0) an output beside it.
  const float loss = net.Forward();
  const float* decoded = net.blob_by_name("decode")->cpu_data();
  const float* data = net.blob_by_name("data")->cpu_data();
  double cross_entropy = 0, l2 = 0;
  for (int i = 0; i < 18; ++i) {
    const double x = decoded[i], t = data[i], p = 1 / (1 + std::exp(-x));
    cross_entropy -= t * std::log(p) + (1 - t) * std::log(1 - p);
    l2 += (p - t) * (p - t);
  }
  EXPECT_NEAR(loss, cross_entropy / 3, 1e-4);
  EXPECT_NEAR(net.blob_by_name("l2_error")->cpu_data()[0], l2 / 6, 1e-5);
  net.Backward();
  // The name finds the layer with parameters, for weights and for lookups.
  EXPECT_EQ(std::string(net.layer_by_name("code")->type()), "InnerProduct");
  NetParameter weights;
  net.ToProto(&weights);
  Net copy(ParseNet(weights.DebugString()), std::make_shared<Context>(Device::kCPU, 0, 5));
  copy.CopyTrainedLayersFrom(weights);
  EXPECT_EQ(copy.layer_by_name("code")->params()[0]->cpu_data()[7],
            net.layer_by_name("code")->params()[0]->cpu_data()[7]);
}

// Where a name would no longer tell two layers apart for a weights file, it is an error saying so.
TEST(NetErrorsTest, TwoLayersOfOneNameWithParametersAreRefused) {
  const std::string message = test::ErrorMessage([] {
    Net net(ParseNet(R"(
      layer { name: 'input' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'a' inner_product_param { num_output: 2 } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'b' inner_product_param { num_output: 2 } })"));
  });
  for (const char* part : {"two layers are named 'ip' (InnerProduct, then InnerProduct) and both hold parameters",
                           "weights file", "rename one"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

TEST(NetTest, DeprecatedNetInputsBecomeAnInputLayer) {
  Net net(ParseNet(R"(
    input: 'data' input_dim: 2 input_dim: 3 input_dim: 4 input_dim: 5
    layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'out' })"));
  ASSERT_EQ(net.input_blobs().size(), 1u);
  EXPECT_EQ(net.input_blobs()[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(net.blob_by_name("out")->shape(), (std::vector<int>{2, 3, 4, 5}));
}

// As Caffe: input_shape wins over input_dim, and shapes or dims beyond the inputs' are ignored, each with a
// warning; too few stay an error.
TEST(NetTest, NetInputsTakeCaffesExtraValuesWithWarnings) {
  const auto input_shapes = [](const std::string& text, std::vector<std::string>* warned) {
    test::LoggedWarnings warnings;
    const NetParameter upgraded = UpgradeInputs(ParseNet(text));
    *warned = warnings.lines();
    std::vector<std::vector<int>> shapes;
    for (const auto& shape : upgraded.layer(0).input_param().shape())
      shapes.emplace_back(shape.dim().begin(), shape.dim().end());
    return shapes;
  };
  std::vector<std::string> warned;
  EXPECT_EQ(input_shapes("name: 'n' input: 'data' input_shape { dim: 2 dim: 3 } input_dim: 1 input_dim: 1 "
                         "input_dim: 1 input_dim: 1",
                         &warned),
            (std::vector<std::vector<int>>{{2, 3}}));
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"net 'n'", "both input_shape and input_dim", "input_dim value(s) are ignored",
                           "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];
  EXPECT_EQ(input_shapes("name: 'n' input: 'a' input: 'b' input_shape { dim: 2 } input_shape { dim: 3 } "
                         "input_shape { dim: 4 }",
                         &warned),
            (std::vector<std::vector<int>>{{2}, {3}}));
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"2 input(s) but 3 input_shape(s)", "other 1 ignored", "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];
  EXPECT_EQ(input_shapes("name: 'n' input: 'data' input_dim: 2 input_dim: 3 input_dim: 4 input_dim: 5 input_dim: 6",
                         &warned),
            (std::vector<std::vector<int>>{{2, 3, 4, 5}}));
  ASSERT_EQ(warned.size(), 1u);
  for (const char* part : {"need 4 input_dim values, got 5", "other 1 ignored", "as Caffe does"})
    EXPECT_NE(warned[0].find(part), std::string::npos) << warned[0];

  test::ExpectErrorContaining([&] { UpgradeInputs(ParseNet("input: 'a' input: 'b' input: 'c' input_shape { dim: 2 } "
                                                           "input_shape { dim: 3 }")); },
                              {"3 input(s) but 2 input_shape(s)"});
  test::ExpectErrorContaining([&] { UpgradeInputs(ParseNet("input: 'a' input_dim: 2 input_dim: 3")); },
                              {"need 4 input_dim values, got 2"});
  test::ExpectErrorContaining([&] { UpgradeInputs(ParseNet("input: 'a'")); }, {"input_shape or input_dim"});
}

}  // namespace
}  // namespace crema
