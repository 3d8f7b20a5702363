// The legacy-net upgrade (net/upgrade.hpp): V1 and V0 nets against the nets of today written here by hand, field
// by field; deprecated data-layer and BatchNorm fields; the notices and how often they are logged; the three
// upgrade tools (an already current file goes through unchanged); and the interoperability point of issue 11:
// a V1 .caffemodel written here, layer by layer, gives exactly the outputs of the net its weights came from.
#include <glog/logging.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "net/net.hpp"
#include "net/passes.hpp"
#include "net/upgrade.hpp"
#include "net/upgrade_steps.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using test::ParseNet;

// Expects the same fields to be set in both messages, with the same values; names the differences.
void ExpectSameMessage(const google::protobuf::Message& actual, const google::protobuf::Message& expected) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(actual, expected)) << differences << "actual:\n" << actual.DebugString();
}

// `text` upgraded; expects it to need the upgrade before and not after.
NetParameter Upgraded(const std::string& text, NetInputs inputs = NetInputs::kKeep,
                      std::vector<std::string>* notices = nullptr) {
  NetParameter net = ParseNet(text);
  EXPECT_TRUE(NetNeedsUpgrade(net, inputs));
  const std::vector<std::string> result = UpgradeLegacyNet(&net, "old.prototxt", inputs);
  if (notices != nullptr) *notices = result;
  EXPECT_FALSE(NetNeedsUpgrade(net, inputs)) << net.DebugString();
  return net;
}

bool ContainsAll(const std::string& text, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    if (text.find(part) == std::string::npos) return false;
  return true;
}

// How many of `lines` contain every one of `parts`.
int CountContaining(const std::vector<std::string>& lines, const std::vector<std::string>& parts) {
  int count = 0;
  for (const auto& line : lines) count += ContainsAll(line, parts);
  return count;
}

// A V1 net with a layer of most kinds: data layers with their preprocessing in data_param and include rules,
// blobs_lr / weight_decay / param names / blob_share_mode, loss weights, exclude rules.
const char kV1Net[] = R"(
name: 'v1net'
layers {
  name: 'data' type: DATA top: 'data' top: 'label'
  data_param { source: 'train_db' batch_size: 64 scale: 0.00390625 mean_file: 'mean.binaryproto' crop_size: 24
               mirror: true }
  include { phase: TRAIN }
}
layers {
  name: 'test_data' type: DATA top: 'data' top: 'label'
  data_param { source: 'test_db' batch_size: 100 backend: LMDB scale: 0.5 }
  transform_param { scale: 0.00390625 }
  include { phase: TEST }
}
layers {
  name: 'conv1' type: CONVOLUTION bottom: 'data' top: 'conv1'
  blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  convolution_param { num_output: 20 kernel_size: 5 stride: 1 weight_filler { type: 'xavier' }
                      bias_filler { type: 'constant' } }
}
layers { name: 'pool1' type: POOLING bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { name: 'relu1' type: RELU bottom: 'pool1' top: 'pool1' relu_param { negative_slope: 0.1 } }
layers { name: 'norm1' type: LRN bottom: 'pool1' top: 'norm1'
         lrn_param { local_size: 3 alpha: 5e-05 beta: 0.75 norm_region: WITHIN_CHANNEL } }
layers {
  name: 'ip1' type: INNER_PRODUCT bottom: 'norm1' top: 'ip1'
  param: 'shared_w' param: '' blob_share_mode: PERMISSIVE blobs_lr: 1 blobs_lr: 2 weight_decay: 1
  inner_product_param { num_output: 10 weight_filler { type: 'gaussian' std: 0.01 } }
}
layers { name: 'drop1' type: DROPOUT bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.4 } }
layers { name: 'concat' type: CONCAT bottom: 'ip1' bottom: 'ip1' top: 'both' concat_param { concat_dim: 1 } }
layers { name: 'loss' type: SOFTMAX_LOSS bottom: 'ip1' bottom: 'label' top: 'loss' loss_weight: 2
         loss_param { ignore_label: 3 } }
layers { name: 'accuracy' type: ACCURACY bottom: 'ip1' bottom: 'label' top: 'accuracy' accuracy_param { top_k: 5 }
         include { phase: TEST } }
layers { name: 'silence' type: SILENCE bottom: 'both' exclude { stage: 'deploy' } }
)";

// kV1Net as Caffe's upgrade writes it. test_data's data_param.scale replaces its transform_param.scale: in a
// V1 net the old field won.
const char kV1NetToday[] = R"(
name: 'v1net'
layer {
  name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TRAIN }
  data_param { source: 'train_db' batch_size: 64 }
  transform_param { scale: 0.00390625 mean_file: 'mean.binaryproto' crop_size: 24 mirror: true }
}
layer {
  name: 'test_data' type: 'Data' top: 'data' top: 'label' include { phase: TEST }
  data_param { source: 'test_db' batch_size: 100 backend: LMDB }
  transform_param { scale: 0.5 }
}
layer {
  name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 20 kernel_size: 5 stride: 1 weight_filler { type: 'xavier' }
                      bias_filler { type: 'constant' } }
}
layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: 'relu1' type: 'ReLU' bottom: 'pool1' top: 'pool1' relu_param { negative_slope: 0.1 } }
layer { name: 'norm1' type: 'LRN' bottom: 'pool1' top: 'norm1'
        lrn_param { local_size: 3 alpha: 5e-05 beta: 0.75 norm_region: WITHIN_CHANNEL } }
layer {
  name: 'ip1' type: 'InnerProduct' bottom: 'norm1' top: 'ip1'
  param { name: 'shared_w' share_mode: PERMISSIVE lr_mult: 1 decay_mult: 1 } param { name: '' lr_mult: 2 }
  inner_product_param { num_output: 10 weight_filler { type: 'gaussian' std: 0.01 } }
}
layer { name: 'drop1' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.4 } }
layer { name: 'concat' type: 'Concat' bottom: 'ip1' bottom: 'ip1' top: 'both' concat_param { concat_dim: 1 } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' loss_weight: 2
        loss_param { ignore_label: 3 } }
layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip1' bottom: 'label' top: 'accuracy' accuracy_param { top_k: 5 }
        include { phase: TEST } }
layer { name: 'silence' type: 'Silence' bottom: 'both' exclude { stage: 'deploy' } }
)";

TEST(UpgradeV1Test, EveryFieldReachesItsPlaceInTodaysForm) {
  std::vector<std::string> notices;
  const NetParameter upgraded = Upgraded(kV1Net, NetInputs::kKeep, &notices);
  ExpectSameMessage(upgraded, ParseNet(kV1NetToday));
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_TRUE(ContainsAll(notices[0], {"old.prototxt: ", "'data': scale, mean_file, crop_size, mirror",
                                       "'test_data': scale", "transform_param"}))
      << notices[0];
  EXPECT_TRUE(ContainsAll(notices[1], {"old.prototxt: ", "12 layer(s)", "V1 format"})) << notices[1];
  // The include and exclude rules work once upgraded: the filter pass keeps the TEST layers.
  NetParameter test_phase = upgraded;
  test_phase.mutable_state()->set_phase(TEST);
  std::vector<std::string> kept;
  const NetParameter filtered = FilterNet(test_phase);
  for (const auto& layer : filtered.layer()) kept.push_back(layer.name());
  EXPECT_EQ(kept, (std::vector<std::string>{"test_data", "conv1", "pool1", "relu1", "norm1", "ip1", "drop1", "concat",
                                            "loss", "accuracy", "silence"}));
}

TEST(UpgradeV1Test, EveryV1TypeHasTodaysName) {
  // Each enum value of V1LayerParameter.LayerType names a type crema has (NONE: none, as in Caffe).
  const std::vector<std::string> known = LayerRegistry::Global().Types();
  const auto* types = V1LayerParameter::LayerType_descriptor();
  ASSERT_EQ(types->value_count(), 40);
  for (int i = 0; i < types->value_count(); ++i) {
    const auto type = static_cast<V1LayerParameter::LayerType>(types->value(i)->number());
    const std::string name = V1TypeName(type);
    EXPECT_EQ(name.empty(), type == V1LayerParameter::NONE) << types->value(i)->name();
    if (!name.empty()) {
      EXPECT_NE(std::find(known.begin(), known.end(), name), known.end()) << name;
    }
  }
  EXPECT_EQ(V1TypeName(V1LayerParameter::SOFTMAX_LOSS), "SoftmaxWithLoss");
  EXPECT_EQ(V1TypeName(V1LayerParameter::IMAGE_DATA), "ImageData");
  EXPECT_EQ(V1TypeName(V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS), "SigmoidCrossEntropyLoss");
}

TEST(UpgradeV1Test, ANetInBothFormsIsRefused) {
  NetParameter mixed = ParseNet(
      "layers { name: 'a' type: RELU bottom: 'x' top: 'x' } layer { name: 'b' type: 'ReLU' bottom: 'x' top: 'x' }");
  test::ExpectErrorContaining([&] { UpgradeLegacyNet(&mixed, "mixed.prototxt"); },
                              {"mixed.prototxt", "both `layer`", "V1 `layers`", "one form"});
}

// A V0 net: inline parameters, net-level inputs, and a padding layer that must become conv1's pad.
const char kV0Net[] = R"(
name: 'v0net'
input: 'data'
input_dim: 2 input_dim: 3 input_dim: 8 input_dim: 8
layers { layer { name: 'pad1' type: 'padding' pad: 2 } bottom: 'data' top: 'pad1' }
layers {
  layer { name: 'conv1' type: 'conv' num_output: 4 kernelsize: 3 stride: 1 group: 1 biasterm: false
          weight_filler { type: 'gaussian' std: 0.1 } blobs_lr: 1 weight_decay: 1 }
  bottom: 'pad1' top: 'conv1'
}
layers { layer { name: 'relu1' type: 'relu' } bottom: 'conv1' top: 'conv1' }
layers { layer { name: 'pool1' type: 'pool' pool: AVE kernelsize: 2 stride: 2 } bottom: 'conv1' top: 'pool1' }
layers { layer { name: 'norm1' type: 'lrn' local_size: 3 alpha: 0.0001 beta: 0.75 } bottom: 'pool1' top: 'norm1' }
layers {
  layer { name: 'fc' type: 'innerproduct' num_output: 5 weight_filler { type: 'gaussian' std: 0.2 }
          bias_filler { type: 'gaussian' std: 0.2 } }
  bottom: 'norm1' top: 'fc'
}
layers { layer { name: 'drop' type: 'dropout' dropout_ratio: 0.3 } bottom: 'fc' top: 'fc' }
layers { layer { name: 'prob' type: 'softmax' } bottom: 'fc' top: 'prob' }
)";

const char kV0NetToday[] = R"(
name: 'v0net'
layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer {
  name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1' param { lr_mult: 1 decay_mult: 1 }
  convolution_param { num_output: 4 bias_term: false pad: 2 kernel_size: 3 stride: 1 group: 1
                      weight_filler { type: 'gaussian' std: 0.1 } }
}
layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: 'norm1' type: 'LRN' bottom: 'pool1' top: 'norm1' lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer {
  name: 'fc' type: 'InnerProduct' bottom: 'norm1' top: 'fc'
  inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.2 }
                        bias_filler { type: 'gaussian' std: 0.2 } }
}
layer { name: 'drop' type: 'Dropout' bottom: 'fc' top: 'fc' dropout_param { dropout_ratio: 0.3 } }
layer { name: 'prob' type: 'Softmax' bottom: 'fc' top: 'prob' }
)";

std::vector<float> ForwardOutput(Net* net, const std::string& output, uint64_t input_seed = 5) {
  test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, input_seed);
  net->Forward();
  return test::DataOf(*net->blob_by_name(output));
}

TEST(UpgradeV0Test, PaddingLayersFoldIntoTheConvolution) {
  std::vector<std::string> notices;
  ExpectSameMessage(Upgraded(kV0Net, NetInputs::kIntoInputLayer, &notices), ParseNet(kV0NetToday));
  ASSERT_EQ(notices.size(), 3u);
  EXPECT_TRUE(ContainsAll(notices[0], {"old.prototxt: ", "7 layer(s)", "V0 format", "'pad1' into 'conv1'"}))
      << notices[0];
  EXPECT_TRUE(ContainsAll(notices[1], {"old.prototxt: ", "7 layer(s)", "V1 format"})) << notices[1];
  EXPECT_TRUE(ContainsAll(notices[2], {"old.prototxt: ", "'data'", "Input layer"})) << notices[2];
  // Built straight from the V0 text (the upgrade_legacy and upgrade_inputs passes), the net computes what
  // today's net with the same weights computes: the padding is there.
  Net legacy(ParseNet(kV0Net));
  Net today(ParseNet(kV0NetToday), std::make_shared<Context>(Device::kCPU, 0, 77));
  EXPECT_EQ(legacy.blob_by_name("conv1")->shape(), (std::vector<int>{2, 4, 10, 10}));
  // Its weights written back into the V0 text (V0LayerParameter.blobs), as a V0 .caffemodel holds them.
  NetParameter weights;
  legacy.ToProto(&weights);
  NetParameter v0_weights = ParseNet(kV0Net);
  for (V1LayerParameter& entry : *v0_weights.mutable_layers())
    for (const LayerParameter& layer : weights.layer())
      if (layer.name() == entry.layer().name()) *entry.mutable_layer()->mutable_blobs() = layer.blobs();
  EXPECT_EQ(today.CopyTrainedLayersFrom(v0_weights), (std::vector<std::string>{"conv1", "fc"}));
  EXPECT_EQ(ForwardOutput(&legacy, "prob"), ForwardOutput(&today, "prob"));
}

TEST(UpgradeV0Test, DataLayerFieldsAndFieldsATypeDoesNotTake) {
  std::vector<std::string> notices;
  const NetParameter upgraded = Upgraded(R"(
    layers { layer { name: 'data' type: 'data' source: 'db' batchsize: 32 meanfile: 'mean.binaryproto' cropsize: 20
                     mirror: true scale: 0.5 rand_skip: 7 } top: 'data' top: 'label' }
    layers { layer { name: 'relu' type: 'relu' num_output: 3 kernelsize: 2 } bottom: 'data' top: 'data' }
    layers { layer { name: 'cat' type: 'concat' concat_dim: 1 } bottom: 'data' bottom: 'data' top: 'cat' }
    layers { layer { name: 'win' type: 'window_data' source: 'windows.txt' det_fg_threshold: 0.6 det_context_pad: 4
                     det_crop_mode: 'square' } top: 'w' top: 'wl' }
  )",
                                         NetInputs::kKeep, &notices);
  ExpectSameMessage(upgraded, ParseNet(R"(
    layer { name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: 'db' batch_size: 32 rand_skip: 7 }
            transform_param { scale: 0.5 mean_file: 'mean.binaryproto' crop_size: 20 mirror: true } }
    layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'data' }
    layer { name: 'cat' type: 'Concat' bottom: 'data' bottom: 'data' top: 'cat' concat_param { concat_dim: 1 } }
    layer { name: 'win' type: 'WindowData' top: 'w' top: 'wl'
            window_data_param { source: 'windows.txt' fg_threshold: 0.6 context_pad: 4 crop_mode: 'square' } }
  )"));
  ASSERT_EQ(notices.size(), 3u);
  EXPECT_TRUE(ContainsAll(notices[1], {"ignored", "'relu' (relu) num_output", "'relu' (relu) kernelsize"}))
      << notices[1];
}

TEST(UpgradeV0Test, WhatHasNoUpgradeIsNamed) {
  NetParameter unknown = ParseNet("layers { layer { name: 'odd' type: 'fancy' } top: 'x' }");
  test::ExpectErrorContaining([&] { UpgradeLegacyNet(&unknown, "odd.prototxt"); },
                              {"'odd'", "'fancy'", "known types: ", "innerproduct", "padding"});
  NetParameter misplaced = ParseNet(R"(
    input: 'data' input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layers { layer { name: 'pad1' type: 'padding' pad: 1 } bottom: 'data' top: 'pad1' }
    layers { layer { name: 'fc' type: 'innerproduct' num_output: 2 } bottom: 'pad1' top: 'fc' }
  )");
  test::ExpectErrorContaining([&] { UpgradeLegacyNet(&misplaced, "pad.prototxt"); },
                              {"'pad1'", "'fc' (innerproduct)", "conv or pool"});
}

TEST(UpgradeFieldsTest, DataLayersOfTodayKeepTransformParamWhereBothSaySomething) {
  std::vector<std::string> notices;
  const NetParameter upgraded = Upgraded(R"(
    layer { name: 'images' type: 'ImageData' top: 'data' top: 'label'
            image_data_param { source: 'list.txt' scale: 0.5 mirror: true } transform_param { scale: 0.25 } }
    layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'data' }
  )",
                                         NetInputs::kKeep, &notices);
  ExpectSameMessage(upgraded, ParseNet(R"(
    layer { name: 'images' type: 'ImageData' top: 'data' top: 'label'
            image_data_param { source: 'list.txt' } transform_param { scale: 0.25 mirror: true } }
    layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'data' }
  )"));
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(ContainsAll(notices[0], {"'images': scale (dropped: transform_param sets it), mirror"})) << notices[0];
}

const char kBatchNormNet[] = R"(
name: 'old_batch_norm'
layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 4 dim: 3 dim: 2 dim: 2 } } }
layer { name: 'bn1' type: 'BatchNorm' bottom: 'data' top: 'bn1'
        param { lr_mult: 1 } param { name: 'variance' lr_mult: 1 decay_mult: 1 } param { lr_mult: 0 } }
layer { name: 'bn2' type: 'BatchNorm' bottom: 'bn1' top: 'bn2'
        param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 } }
)";

TEST(UpgradeFieldsTest, OldBatchNormSpecsStopLearning) {
  std::vector<std::string> notices;
  const NetParameter upgraded = Upgraded(kBatchNormNet, NetInputs::kKeep, &notices);
  // lr_mult and decay_mult become 0, the sharing name stays; bn2 needed nothing.
  NetParameter expected = ParseNet(kBatchNormNet);
  for (ParamSpec& spec : *expected.mutable_layer(1)->mutable_param()) {
    spec.set_lr_mult(0);
    spec.set_decay_mult(0);
  }
  ExpectSameMessage(upgraded, expected);
  EXPECT_EQ(upgraded.layer(1).param(1).name(), "variance");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(ContainsAll(notices[0], {"'bn1'", "lr_mult and decay_mult", "statistics"})) << notices[0];
  EXPECT_EQ(notices[0].find("bn2"), std::string::npos) << notices[0];

  // Without the upgrade the layer refuses the learning rate; with it (the default passes) the net trains with
  // its statistics left to the layer.
  NetParameter train = ParseNet(kBatchNormNet);
  train.mutable_state()->set_phase(TRAIN);
  NetPasses without = NetPasses::Default();
  without.parameter.erase(without.parameter.begin());
  test::ExpectErrorContaining([&] { Net net(train, nullptr, without); }, {"bn1", "lr_mult 1", "statistics"});
  Net net(train);
  EXPECT_EQ(net.passes_run().front(), "upgrade_legacy");
  for (float lr : net.params_lr()) EXPECT_EQ(lr, 0.f);
  for (float decay : net.params_weight_decay()) EXPECT_EQ(decay, 0.f);
  // A BatchNorm with other than three specs is not Caffe's old definition: left alone.
  NetParameter two =
      ParseNet("layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'y' param { lr_mult: 1 } param { lr_mult: 1 } }");
  EXPECT_FALSE(NetNeedsUpgrade(two));
}

// A LeNet of today with random weights, and the same net as a V1 prototxt.
const char kLeNet[] = R"(
name: 'lenet_interop'
layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 1 dim: 12 dim: 12 } } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.3 }
                            bias_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: 'relu1' type: 'ReLU' bottom: 'pool1' top: 'pool1' }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool1' top: 'ip1'
        inner_product_param { num_output: 6 weight_filler { type: 'gaussian' std: 0.3 }
                              bias_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
        inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.3 }
                              bias_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'prob' type: 'Softmax' bottom: 'ip2' top: 'prob' }
)";

const char kLeNetV1[] = R"(
name: 'lenet_interop_v1'
input: 'data'
input_dim: 2 input_dim: 1 input_dim: 12 input_dim: 12
layers { name: 'conv1' type: CONVOLUTION bottom: 'data' top: 'conv1' blobs_lr: 1 blobs_lr: 2
         convolution_param { num_output: 4 kernel_size: 3 } }
layers { name: 'pool1' type: POOLING bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layers { name: 'relu1' type: RELU bottom: 'pool1' top: 'pool1' }
layers { name: 'ip1' type: INNER_PRODUCT bottom: 'pool1' top: 'ip1' inner_product_param { num_output: 6 } }
layers { name: 'ip2' type: INNER_PRODUCT bottom: 'ip1' top: 'ip2' inner_product_param { num_output: 3 } }
layers { name: 'prob' type: SOFTMAX bottom: 'ip2' top: 'prob' }
)";

// `weights` (a net of today's, as ToProto writes it) as old Caffe wrote .caffemodels: V1 `layers` with enum
// types, every blob in the 4-d num/channels/height/width fields, and the input named without a shape.
NetParameter AsV1Weights(const NetParameter& weights) {
  const std::map<std::string, V1LayerParameter::LayerType> types = {{"Convolution", V1LayerParameter::CONVOLUTION},
                                                                    {"Pooling", V1LayerParameter::POOLING},
                                                                    {"ReLU", V1LayerParameter::RELU},
                                                                    {"InnerProduct", V1LayerParameter::INNER_PRODUCT},
                                                                    {"Softmax", V1LayerParameter::SOFTMAX}};
  NetParameter v1;
  v1.set_name(weights.name());
  v1.add_input("data");
  for (const LayerParameter& layer : weights.layer()) {
    if (layer.type() == "Input") continue;
    V1LayerParameter* entry = v1.add_layers();
    entry->set_name(layer.name());
    entry->set_type(types.at(layer.type()));
    *entry->mutable_bottom() = layer.bottom();
    *entry->mutable_top() = layer.top();
    for (const BlobProto& blob : layer.blobs()) {
      std::vector<int> dims(blob.shape().dim().begin(), blob.shape().dim().end());
      while (dims.size() < 4) dims.insert(dims.begin(), 1);
      BlobProto* legacy = entry->add_blobs();
      legacy->set_num(dims[0]);
      legacy->set_channels(dims[1]);
      legacy->set_height(dims[2]);
      legacy->set_width(dims[3]);
      *legacy->mutable_data() = blob.data();
    }
  }
  return v1;
}

TEST(UpgradeInteropTest, AV1CaffemodelGivesTheOutputsOfTheNetItCameFrom) {
  test::TempDir dir;
  Net original(ParseNet(kLeNet), std::make_shared<Context>(Device::kCPU, 0, 11));
  const std::vector<float> expected = ForwardOutput(&original, "prob");
  NetParameter weights;
  original.ToProto(&weights);
  const std::string v1_weights = dir.file("lenet_v1.caffemodel");
  WriteProtoToBinaryFile(AsV1Weights(weights), v1_weights);
  // The file really is V1: field 2, no field 100.
  NetParameter read;
  ReadProtoFromBinaryFile(v1_weights, &read);
  EXPECT_EQ(read.layers_size(), 6);
  EXPECT_EQ(read.layer_size(), 0);

  // Into today's net (other random weights before): the same outputs, exactly.
  Net copy(ParseNet(kLeNet), std::make_shared<Context>(Device::kCPU, 0, 12));
  EXPECT_NE(ForwardOutput(&copy, "prob"), expected);
  test::LoggedWarnings warnings;
  EXPECT_EQ(copy.CopyTrainedLayersFrom(v1_weights), (std::vector<std::string>{"conv1", "ip1", "ip2"}));
  EXPECT_EQ(ForwardOutput(&copy, "prob"), expected);
  EXPECT_EQ(CountContaining(warnings.lines(), {v1_weights, "V1 format", "upgrade_net_proto_binary"}), 1);

  // The same weights handed over as a message.
  Net from_message(ParseNet(kLeNet), std::make_shared<Context>(Device::kCPU, 0, 14));
  EXPECT_EQ(from_message.CopyTrainedLayersFrom(read), (std::vector<std::string>{"conv1", "ip1", "ip2"}));
  EXPECT_EQ(ForwardOutput(&from_message, "prob"), expected);

  // A V1 prototxt built from its path, with those weights: the same outputs again.
  WriteStringToFileAtomically(kLeNetV1, dir.file("lenet_v1.prototxt"));
  Net from_v1(dir.file("lenet_v1.prototxt"), TEST);
  EXPECT_EQ(from_v1.CopyTrainedLayersFrom(v1_weights), (std::vector<std::string>{"conv1", "ip1", "ip2"}));
  EXPECT_EQ(ForwardOutput(&from_v1, "prob"), expected);
  EXPECT_EQ(CountContaining(warnings.lines(), {dir.file("lenet_v1.prototxt"), "6 layer(s)", "V1 format"}), 1);
  // blobs_lr became the learning rates of conv1's weights and bias.
  ASSERT_GE(from_v1.params_lr().size(), 2u);
  EXPECT_EQ(from_v1.params_lr()[0], 1.f);
  EXPECT_EQ(from_v1.params_lr()[1], 2.f);

  // upgrade_net_proto_binary: today's layers, the weights unchanged, the shapeless input name dropped.
  std::string output;
  const std::string today_weights = dir.file("lenet.caffemodel");
  ASSERT_EQ(
      test::RunCommand(test::ToolsDir() + "/upgrade_net_proto_binary " + v1_weights + " " + today_weights, &output), 0)
      << output;
  EXPECT_TRUE(ContainsAll(output, {"6 layer(s) from Caffe's V1 format", "dropped the net-level input name(s) 'data'",
                                   "Wrote upgraded NetParameter binary proto to " + today_weights}))
      << output;
  NetParameter upgraded;
  ReadProtoFromBinaryFile(today_weights, &upgraded);
  EXPECT_EQ(upgraded.layers_size(), 0);
  EXPECT_EQ(upgraded.input_size(), 0);
  ASSERT_EQ(upgraded.layer_size(), 6);
  EXPECT_EQ(upgraded.layer(0).type(), "Convolution");
  EXPECT_EQ(upgraded.layer(5).type(), "Softmax");
  for (int l = 0; l < 6; ++l) {
    ASSERT_EQ(upgraded.layer(l).blobs_size(), read.layers(l).blobs_size()) << l;
    for (int b = 0; b < upgraded.layer(l).blobs_size(); ++b)
      ExpectSameMessage(upgraded.layer(l).blobs(b), read.layers(l).blobs(b));
  }
  Net from_today(ParseNet(kLeNet), std::make_shared<Context>(Device::kCPU, 0, 13));
  from_today.CopyTrainedLayersFrom(today_weights);
  EXPECT_EQ(ForwardOutput(&from_today, "prob"), expected);
}

TEST(UpgradeToolsTest, TextNetsComeOutInTodaysFormAndCurrentOnesUnchanged) {
  test::TempDir dir;
  const std::string tool = test::ToolsDir() + "/upgrade_net_proto_text ";
  WriteStringToFileAtomically(kV1Net, dir.file("v1.prototxt"));
  std::string output;
  ASSERT_EQ(test::RunCommand(tool + dir.file("v1.prototxt") + " " + dir.file("today.prototxt"), &output), 0) << output;
  EXPECT_TRUE(ContainsAll(output, {dir.file("v1.prototxt") + ": upgraded 12 layer(s) from Caffe's V1 format",
                                   "Wrote upgraded NetParameter text proto to " + dir.file("today.prototxt")}))
      << output;
  NetParameter written;
  ReadProtoFromTextFile(dir.file("today.prototxt"), &written);
  ExpectSameMessage(written, ParseNet(kV1NetToday));
  // A file already in today's form is written again as it was.
  ASSERT_EQ(test::RunCommand(tool + dir.file("today.prototxt") + " " + dir.file("again.prototxt"), &output), 0)
      << output;
  EXPECT_TRUE(ContainsAll(output, {"File already in latest proto format: " + dir.file("today.prototxt")})) << output;
  EXPECT_EQ(test::FileBytes(dir.file("again.prototxt")), test::FileBytes(dir.file("today.prototxt")));

  // Net-level inputs become an Input layer in the file.
  WriteStringToFileAtomically(kV0Net, dir.file("v0.prototxt"));
  ASSERT_EQ(test::RunCommand(tool + dir.file("v0.prototxt") + " " + dir.file("v0_today.prototxt"), &output), 0)
      << output;
  ReadProtoFromTextFile(dir.file("v0_today.prototxt"), &written);
  ExpectSameMessage(written, ParseNet(kV0NetToday));

  // Errors: the usage, a missing file, a net with no upgrade.
  EXPECT_EQ(test::RunCommand(tool + dir.file("v1.prototxt"), &output), 1);
  EXPECT_TRUE(ContainsAll(output, {"usage: upgrade_net_proto_text NET_IN NET_OUT"})) << output;
  EXPECT_EQ(test::RunCommand(tool + dir.file("missing.prototxt") + " " + dir.file("out.prototxt"), &output), 1);
  EXPECT_TRUE(ContainsAll(output, {"upgrade_net_proto_text: error: ", dir.file("missing.prototxt")})) << output;
  WriteStringToFileAtomically("layers { layer { name: 'odd' type: 'fancy' } }", dir.file("odd.prototxt"));
  EXPECT_EQ(test::RunCommand(tool + dir.file("odd.prototxt") + " " + dir.file("out.prototxt"), &output), 1);
  EXPECT_TRUE(ContainsAll(output, {"upgrade_net_proto_text: error: ", "'odd'", "'fancy'"})) << output;
  EXPECT_FALSE(FileExists(dir.file("out.prototxt")));
}

TEST(UpgradeToolsTest, SolverTypeBecomesTheTypeString) {
  test::TempDir dir;
  const std::string tool = test::ToolsDir() + "/upgrade_solver_proto_text ";
  WriteStringToFileAtomically(
      "net: 'lenet.prototxt' base_lr: 0.01 lr_policy: 'fixed' solver_type: ADAM momentum2: 0.99 "
      "test_net_param { input: 'x' input_shape { dim: 2 } layers { name: 'r' type: RELU bottom: 'x' top: 'y' } }",
      dir.file("solver.prototxt"));
  std::string output;
  ASSERT_EQ(test::RunCommand(tool + dir.file("solver.prototxt") + " " + dir.file("today.prototxt"), &output), 0)
      << output;
  EXPECT_TRUE(ContainsAll(output, {dir.file("solver.prototxt") + ": replaced the deprecated solver_type: ADAM by type: "
                                                                 "\"Adam\"",
                                   "(test_net_param 0): upgraded 1 layer(s) from Caffe's V1 format",
                                   "Wrote upgraded SolverParameter text proto to " + dir.file("today.prototxt")}))
      << output;
  SolverParameter written, expected;
  ReadProtoFromTextFile(dir.file("today.prototxt"), &written);
  ReadProtoFromText(
      "net: 'lenet.prototxt' base_lr: 0.01 lr_policy: 'fixed' type: 'Adam' momentum2: 0.99 "
      "test_net_param { layer { name: 'input' type: 'Input' top: 'x' input_param { shape { dim: 2 } } } "
      "                 layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' } }",
      "expected", &expected);
  ExpectSameMessage(written, expected);
  ASSERT_EQ(test::RunCommand(tool + dir.file("today.prototxt") + " " + dir.file("again.prototxt"), &output), 0)
      << output;
  EXPECT_TRUE(ContainsAll(output, {"File already in latest proto format"})) << output;
  EXPECT_EQ(test::FileBytes(dir.file("again.prototxt")), test::FileBytes(dir.file("today.prototxt")));

  // Both fields, disagreeing: which one was meant is not for the tool to guess.
  WriteStringToFileAtomically("type: 'SGD' solver_type: NESTEROV", dir.file("both.prototxt"));
  EXPECT_EQ(test::RunCommand(tool + dir.file("both.prototxt") + " " + dir.file("out.prototxt"), &output), 1);
  EXPECT_TRUE(ContainsAll(
      output, {"upgrade_solver_proto_text: error: ", dir.file("both.prototxt"), "\"SGD\"", "NESTEROV", "disagree"}))
      << output;
  // Agreeing, the old field just goes.
  SolverParameter agreeing;
  ReadProtoFromText("type: 'Nesterov' solver_type: NESTEROV", "agreeing", &agreeing);
  EXPECT_TRUE(SolverNeedsUpgrade(agreeing));
  EXPECT_EQ(UpgradeLegacySolver(&agreeing, "agreeing").size(), 1u);
  EXPECT_EQ(agreeing.type(), "Nesterov");
  EXPECT_FALSE(agreeing.has_solver_type());
}

// A solver reads its net file once for the training net and once more for the test net: one notice all the same.
TEST(UpgradeNoticesTest, OneFileIsAnnouncedOnceHoweverManyNetsItMakes) {
  test::TempDir dir;
  WriteStringToFileAtomically(R"(
    name: 'once_per_file'
    input: 'data' input_dim: 4 input_dim: 3 input_dim: 1 input_dim: 1
    input: 'label' input_dim: 4 input_dim: 1 input_dim: 1 input_dim: 1
    layers { name: 'ip' type: INNER_PRODUCT bottom: 'data' top: 'ip' blobs_lr: 1 blobs_lr: 2
             inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.1 } } }
    layers { name: 'loss' type: SOFTMAX_LOSS bottom: 'ip' bottom: 'label' top: 'loss' }
    layers { name: 'accuracy' type: ACCURACY bottom: 'ip' bottom: 'label' top: 'accuracy' include { phase: TEST } }
  )",
                              dir.file("net.prototxt"));
  SolverParameter param;
  ReadProtoFromText("net: '" + dir.file("net.prototxt") +
                        "' base_lr: 0.1 lr_policy: 'fixed' solver_mode: CPU test_iter: 1 test_interval: 10",
                    "solver", &param);
  test::LoggedWarnings warnings;
  auto solver = CreateSolver(param);
  EXPECT_TRUE(solver->net()->has_layer("loss"));
  EXPECT_FALSE(solver->net()->has_layer("accuracy"));
  // The solver upgrades the file as it reads it, so the notice names the file.
  EXPECT_EQ(CountContaining(warnings.lines(), {dir.file("net.prototxt") + ": upgraded", "3 layer(s)", "V1 format"}), 1);
  EXPECT_EQ(CountContaining(warnings.lines(), {"V1 format"}), 1);
  // The upgraded net's parameters learn at the rates blobs_lr gave.
  EXPECT_EQ(solver->net()->params_lr(), (std::vector<float>{1.f, 2.f}));
}

}  // namespace
}  // namespace crema
