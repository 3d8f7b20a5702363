// The net's foundation: shapes that flow through a built net, buffers the plan sees (views, internal blobs,
// one workspace), passes run and tested one at a time, and the hook that reports each finished gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "core/context.hpp"
#include "core/random.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"
#include "net/lifetimes.hpp"
#include "net/memory_plan.hpp"
#include "net/net.hpp"
#include "net/passes.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using test::ParseNet;

// conv (two channels) -> in-place ReLU -> max pool (internal argmax) -> flatten (a view) read twice (a Split:
// views again) -> softmax (the loss) and a leaky ReLU; every layer's output shape follows the input's height
// and width. force_backward gives the input a gradient too.
const char kConvLayers[] = R"(
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 2 kernel_size: 3 pad: 1
                                weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' } } }
    layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
    layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'flat' type: 'Flatten' bottom: 'pool' top: 'flat' flatten_param { axis: 2 } }
    layer { name: 'soft' type: 'Softmax' bottom: 'flat' top: 'soft' softmax_param { axis: 2 } loss_weight: 1 }
    layer { name: 'leaky' type: 'ReLU' bottom: 'flat' top: 'leaky' relu_param { negative_slope: 0.1 } }
  )";
std::string ConvNet(int n, int height, int width) {
  return "name: 'flowing' force_backward: true\n"
         "layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: " +
         std::to_string(n) + " dim: 1 dim: " + std::to_string(height) + " dim: " + std::to_string(width) + " } } }" +
         kConvLayers;
}

// Every blob of `net` by name: its shape, data and diff.
struct Snapshot {
  std::map<std::string, std::vector<int>> shapes;
  std::map<std::string, std::vector<float>> data, diff;
};
Snapshot Take(const Net& net) {
  Snapshot snapshot;
  for (size_t id = 0; id < net.blobs().size(); ++id) {
    const std::string& name = net.blob_names()[id];
    snapshot.shapes[name] = net.blobs()[id]->shape();
    snapshot.data[name] = test::DataOf(*net.blobs()[id]);
  }
  return snapshot;
}

// Item 1: reshaping the input reshapes every later step on the next Forward, and the results are those of a net
// built for the new shape from the start (same weights); shrinking and growing again work too.
TEST(NetReshapeTest, AChangedInputFlowsThroughEveryLaterLayer) {
  Net net(ParseNet(ConvNet(2, 8, 8)));
  NetParameter weights;
  net.ToProto(&weights);
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{{4, 1, 10, 10}, {1, 1, 5, 7}, {3, 1, 12, 9}}) {
    SCOPED_TRACE(ShapeString(shape));
    Net fresh(ParseNet(ConvNet(shape[0], shape[2], shape[3])));
    fresh.CopyTrainedLayersFrom(weights);
    net.blob_by_name("data")->Reshape(shape);
    test::FillGaussian(net.blob_by_name("data"), 0, 1, 42);
    test::FillGaussian(fresh.blob_by_name("data"), 0, 1, 42);
    const float loss = net.Forward();
    net.Backward();
    const float fresh_loss = fresh.Forward();
    fresh.Backward();
    EXPECT_FLOAT_EQ(loss, fresh_loss);
    const Snapshot got = Take(net), want = Take(fresh);
    ASSERT_EQ(got.shapes, want.shapes);
    for (const auto& entry : want.data) EXPECT_EQ(got.data.at(entry.first), entry.second) << entry.first;
    EXPECT_EQ(test::DiffOf(*net.blob_by_name("data")), test::DiffOf(*fresh.blob_by_name("data")));
    for (size_t p = 0; p < net.learnable_params().size(); ++p)
      EXPECT_EQ(test::DiffOf(*net.learnable_params()[p]), test::DiffOf(*fresh.learnable_params()[p])) << p;
    net.ClearParamDiffs();
  }
}

// A Data layer whose records change size between batches: the second batch's shape flows through every later
// layer, and the results are those of a net built for that shape and fed the same batch.
TEST(NetReshapeTest, ADataLayerWhoseBatchShapeChangesReshapesTheNet) {
  test::TempDir dir;
  {
    LmdbWriter writer(dir.file("db"));
    RandomStream random(5);
    for (int i = 0; i < 4; ++i) {
      Datum datum;
      datum.set_channels(1);
      datum.set_height(i < 2 ? 6 : 8);
      datum.set_width(i < 2 ? 6 : 7);
      std::string pixels(static_cast<size_t>(datum.height()) * datum.width(), '\0');
      for (auto& pixel : pixels) pixel = static_cast<char>(random.UniformInt(256));
      datum.set_data(pixels);
      writer.Put(RecordKey(i), datum.SerializeAsString());
    }
    writer.Commit();
  }
  Net net(
      ParseNet("name: 'flowing' force_backward: true\n"
               "layer { name: 'input' type: 'Data' top: 'data' transform_param { scale: 0.00390625 } "
               "data_param { source: '" +
               dir.file("db") + "' batch_size: 2 backend: LMDB } }" + kConvLayers));
  NetParameter weights;
  net.ToProto(&weights);
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{{2, 1, 6, 6}, {2, 1, 8, 7}}) {
    SCOPED_TRACE(ShapeString(shape));
    const float loss = net.Forward();
    ASSERT_EQ(net.blob_by_name("data")->shape(), shape);
    Net fresh(ParseNet(ConvNet(shape[0], shape[2], shape[3])));
    fresh.CopyTrainedLayersFrom(weights);
    const std::vector<float> batch = test::DataOf(*net.blob_by_name("data"));
    std::copy(batch.begin(), batch.end(), fresh.blob_by_name("data")->mutable_cpu_data());
    EXPECT_FLOAT_EQ(loss, fresh.Forward());
    const Snapshot got = Take(net), want = Take(fresh);
    ASSERT_EQ(got.shapes, want.shapes);
    for (const auto& entry : want.data) EXPECT_EQ(got.data.at(entry.first), entry.second) << entry.first;
  }
}

// Net::Reshape shows the new shapes before anything runs; a view that would have been left on the bottom's
// old storage is re-made.
TEST(NetReshapeTest, ReshapeAloneShapesTheTopsAndRemakesViews) {
  Net net(ParseNet(ConvNet(2, 8, 8)));
  net.blob_by_name("data")->Reshape({5, 1, 6, 4});
  net.Reshape();
  EXPECT_EQ(net.blob_by_name("conv")->shape(), (std::vector<int>{5, 2, 6, 4}));
  EXPECT_EQ(net.blob_by_name("pool")->shape(), (std::vector<int>{5, 2, 3, 2}));
  EXPECT_EQ(net.blob_by_name("flat")->shape(), (std::vector<int>{5, 2, 6}));
  EXPECT_EQ(net.blob_by_name("soft")->shape(), (std::vector<int>{5, 2, 6}));
  // The flatten top views the pool top's (new) storage, and the split copies view that in turn.
  EXPECT_EQ(net.blob_by_name("flat")->data(), net.blob_by_name("pool")->data());
  EXPECT_EQ(net.blob_by_name("flat")->diff(), net.blob_by_name("pool")->diff());
}

// A layer type that counts its Reshape calls, registered for this test only.
int g_reshapes = 0;
class CountingLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "CountingReshapes"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    ++g_reshapes;
    NeuronLayer::Reshape(bottom, top);
  }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override {
    std::copy(bottom.cpu_data(), bottom.cpu_data() + bottom.count(), top->mutable_cpu_data());
  }
  void BackwardElements(const Blob& top, Blob* bottom) override {}
};

TEST(NetReshapeTest, StepsAreReshapedOnlyWhenTheirBottomsChanged) {
  static bool registered = false;
  if (!registered) LayerRegistry::Global().Add<CountingLayer>("CountingReshapes", {"native"});
  registered = true;
  // Without a memory plan, a new input shape reshapes each later step once; with one, the net also plans again for
  // it (reshaping the steps to learn the new shapes, then again for the new arena). Either way a pass in which
  // nothing changed costs a comparison per step and no Reshape.
  for (bool plan : {false, true}) {
    SCOPED_TRACE(plan ? "planned" : "unplanned");
    Net net(ParseNet(std::string(plan ? "" : "memory_plan: NONE") + R"(
      layer { name: 'input' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } } }
      layer { name: 'count' type: 'CountingReshapes' bottom: 'x' top: 'y' })"));
    ASSERT_EQ(net.memory_plan() != nullptr, plan);
    const int per_change = plan ? 2 : 1;
    g_reshapes = 0;
    for (int i = 0; i < 5; ++i) net.Forward();
    EXPECT_EQ(g_reshapes, 0);
    net.blob_by_name("x")->Reshape({4, 3});
    net.Forward();
    net.Forward();
    EXPECT_EQ(g_reshapes, per_change);
    EXPECT_EQ(net.blob_by_name("y")->shape(), (std::vector<int>{4, 3}));
    net.blob_by_name("x")->Reshape({2, 3});  // smaller: same storage, other shape
    net.Forward();
    EXPECT_EQ(g_reshapes, 2 * per_change);
    EXPECT_EQ(net.blob_by_name("y")->shape(), (std::vector<int>{2, 3}));
  }
}

TEST(NetReshapeTest, AShapeALaterLayerCannotTakeIsNamed) {
  Net net(ParseNet(R"(
    layer { name: 'input' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y' inner_product_param { num_output: 2 } })"));
  net.blob_by_name("x")->Reshape({2, 4});
  test::ExpectErrorContaining([&] { net.Forward(); }, {"layer 'ip' (InnerProduct)", "2 4", "expect 3"});
}

// Item 4: the plan records which tops view which bottoms, the layers' internal blobs, and sizes one workspace.
TEST(NetPlanTest, ViewsInternalBlobsAndTheWorkspaceAreInThePlan) {
  auto context = std::make_shared<Context>();
  // The batched convolution, whose workspace is computed below, and the native pooling, whose argmax is checked.
  context->ForceEngines("Convolution:im2col_batched,Pooling:native");
  Net net(ParseNet(ConvNet(2, 8, 8)), context);
  std::map<std::string, const PlanStep*> steps;
  for (const PlanStep& step : net.plan()) steps[net.layer_names()[step.layer]] = &step;
  ASSERT_EQ(steps.at("flat")->views.size(), 1u);
  EXPECT_TRUE(steps.at("flat")->views[0].diff);  // Flatten: data and diff
  const PlanStep* split = steps.at("flat_flat_0_split");
  ASSERT_EQ(split->views.size(), 2u);
  EXPECT_FALSE(split->views[0].diff);  // Split: data only; each copy's gradient is its own
  // (Under the memory plan both gradients lie in its arena: compared by where they start.)
  const Blob& copy = *net.blobs()[split->tops[1]];
  const Blob& flat = *net.blob_by_name("flat");
  EXPECT_EQ(copy.data(), flat.data());
  EXPECT_EQ(copy.data_offset(), flat.data_offset());
  EXPECT_TRUE(copy.diff() != flat.diff() || copy.diff_offset() != flat.diff_offset());
  // Max pooling keeps its argmax between forward and backward: an internal blob, named, in the plan.
  ASSERT_EQ(steps.at("pool")->internals.size(), 1u);
  EXPECT_EQ(net.blob_names()[steps.at("pool")->internals[0]], "pool.argmax");
  EXPECT_EQ(net.blob_by_name("pool.argmax")->shape(), net.blob_by_name("pool")->shape());
  // The convolution (batched engine) takes its block from its workspace (a slot of the memory plan's arena): the
  // columns of 1 channel * 3 * 3 kernel rows and the staging of its 2 outputs, at 8 * 8 positions, for both images.
  const auto conv_workspace = [&] {
    size_t bytes = 0;
    for (const PlannedWorkspace& slot : net.memory_plan()->workspaces)
      if (net.layer_names()[net.plan()[slot.step].layer] == "conv") bytes = slot.bytes;
    return bytes;
  };
  ASSERT_NE(net.memory_plan(), nullptr);
  EXPECT_EQ(conv_workspace(), (9u + 2u) * 64u * 2u * sizeof(float));
  EXPECT_EQ(net.workspace_bytes(), 0u);  // the shared one is not needed
  net.blob_by_name("data")->Reshape({1, 1, 16, 16});
  net.Forward();
  EXPECT_EQ(conv_workspace(), (9u + 2u) * 256u * sizeof(float));  // one larger image
  net.UnplanMemory();  // without a plan, every layer shares one workspace, as large as the largest request
  EXPECT_EQ(net.workspace_bytes(), (9u + 2u) * 256u * sizeof(float));
  // Activation bytes count each storage once: views add nothing.
  std::set<const SyncedMemory*> storages;
  size_t bytes = 0;
  for (const auto& blob : net.blobs())
    if (storages.insert(blob->data().get()).second) bytes += blob->data()->size();
  EXPECT_EQ(net.activation_bytes(), bytes);
}

// Item 5: each pass runs on its own. A net built without decide_backward runs no step backward; running the
// pass on it afterwards gives the default net's decisions.
TEST(NetPassesTest, AnAfterBuildPassRunsOnItsOwn) {
  const NetParameter param = ParseNet(ConvNet(2, 8, 8));
  NetPasses without = NetPasses::Default();
  without.after_build.clear();
  Net bare(param, nullptr, without);
  EXPECT_EQ(bare.passes_run(),
            (std::vector<std::string>{"upgrade_legacy", "filter", "upgrade_inputs", "fuse_elements", "insert_splits"}));
  for (const PlanStep& step : bare.plan()) EXPECT_FALSE(step.needs_backward);
  DecideBackward(&bare);
  NetParameter separate = param;
  separate.set_fold(false);  // the same steps: no training fusion (net/fuse.hpp) of the convolutions and ReLUs
  Net full(separate);
  EXPECT_EQ(full.passes_run(),
            (std::vector<std::string>{"upgrade_legacy", "filter", "upgrade_inputs", "fuse_elements", "insert_splits",
                                      "decide_backward", "plan_layouts", "fuse_for_training"}));
  ASSERT_EQ(bare.plan().size(), full.plan().size());
  for (size_t s = 0; s < full.plan().size(); ++s) {
    EXPECT_EQ(bare.plan()[s].needs_backward, full.plan()[s].needs_backward) << s;
    EXPECT_EQ(bare.plan()[s].propagate_down, full.plan()[s].propagate_down) << s;
  }
}

// The default passes but plan_layouts: every blob plain, the reference the layout runs are compared with.
NetPasses PassesWithoutPlanLayouts() {
  NetPasses plain = NetPasses::Default();
  plain.after_build.erase(std::remove_if(plain.after_build.begin(), plain.after_build.end(),
                                         [](const NetPass& pass) { return pass.name == "plan_layouts"; }),
                          plain.after_build.end());
  return plain;
}

// plan_layouts keeps a blob in its writer's layout only where every reader takes it: through an in-place ReLU
// into a oneDNN pooling, and from there through a Split into two oneDNN convolutions; not through a Split one of
// whose readers does not take it (the second convolution's output, read by Power), nor into an InnerProduct,
// nor for a net output.
TEST(NetPassesTest, PlanLayoutsKeepsABlobInItsWritersLayoutOnlyWhereEveryReaderTakesIt) {
#ifndef CREMA_USE_ONEDNN
  GTEST_SKIP() << "no engine offers a layout other than plain in a build without oneDNN";
#endif
  const std::string conv =
      " type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 pad: 1"
      " weight_filler { type: 'gaussian' std: 0.1 } } }";
  const std::string pool = " type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }";
  Net net(ParseNet(
      "name: 'runs' force_backward: true\n"
      "layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 12 dim: 12 } } }"
      "layer { name: 'conv1' bottom: 'data' top: 'conv1'" + conv +
      "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }"
      "layer { name: 'pool1' bottom: 'conv1' top: 'pool1'" +
      pool + "layer { name: 'conv2' bottom: 'pool1' top: 'conv2'" + conv +
      "layer { name: 'pool2' bottom: 'conv2' top: 'pool2'" + pool +
      "layer { name: 'conv3' bottom: 'pool1' top: 'conv3'" + conv +
      "layer { name: 'power' type: 'Power' bottom: 'conv2' top: 'power' }"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool2' top: 'ip' inner_product_param { num_output: 4"
      " weight_filler { type: 'gaussian' std: 0.1 } } }"));
  ASSERT_EQ(net.layer_by_name("conv1")->engine(), "onednn");
  ASSERT_EQ(net.layer_by_name("pool1")->engine(), "onednn");
  EXPECT_NE(net.blob_by_name("conv1")->layout(), Layout::kPlain);
  EXPECT_EQ(net.blob_by_name("pool1")->layout(), net.blob_by_name("conv1")->layout());
  for (const char* copy : {"pool1_pool1_0_split_0", "pool1_pool1_0_split_1"})
    EXPECT_EQ(net.blob_by_name(copy)->layout(), net.blob_by_name("conv1")->layout()) << copy;
  for (const char* plain : {"data", "conv2", "conv2_conv2_0_split_0", "pool2", "ip", "power", "conv3"})
    EXPECT_EQ(net.blob_by_name(plain)->layout(), Layout::kPlain) << plain;
  // The net runs, and a blob of another layout is never written to a file.
  test::FillUniform(net.input_blobs()[0], -1.f, 1.f, 3);
  net.Forward();
  net.blob_by_name("ip")->set_diff(1.f);
  net.blob_by_name("power")->set_diff(1.f);
  net.blob_by_name("conv3")->set_diff(1.f);
  net.Backward();
  EXPECT_GT(test::AbsSum(test::DiffOf(*net.input_blobs()[0])), 0.0);
  BlobProto proto;
  EXPECT_THROW(net.blob_by_name("conv1")->ToProto(&proto), Error);
}

// A layer that writes its top in its bottom's layout and cannot reorder (ReLU, Scale: not in place here) takes a
// layout only where its top can stay in it too: not where the top is a net output or goes to a layer that
// reads plain only. The outputs are then those of the net with every blob plain.
TEST(NetPassesTest, PlanLayoutsKeepsAPassThroughLayersTopWithItsBottom) {
#ifndef CREMA_USE_ONEDNN
  GTEST_SKIP() << "no engine offers a layout other than plain in a build without oneDNN";
#endif
  const std::string conv =
      " type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 pad: 1"
      " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 0.1 } } }";
  const NetParameter param = ParseNet(
      "name: 'pass_through' force_backward: true\n"
      "layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }"
      "layer { name: 'conv1' bottom: 'data' top: 'conv1'" + conv +
      "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'relu1' }"
      "layer { name: 'conv2' bottom: 'data' top: 'conv2'" + conv +
      "layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'relu2' }"
      "layer { name: 'power' type: 'Power' bottom: 'relu2' top: 'power' }"
      "layer { name: 'conv3' bottom: 'data' top: 'conv3'" + conv +
      "layer { name: 'relu3' type: 'ReLU' bottom: 'conv3' top: 'relu3' }"
      "layer { name: 'pool3' type: 'Pooling' bottom: 'relu3' top: 'pool3'"
      " pooling_param { pool: MAX kernel_size: 2 stride: 2 } }");
  Net expected(param, std::make_shared<Context>(Device::kCPU, 0, 5), PassesWithoutPlanLayouts());
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, 5));
  for (const char* stays_plain : {"conv1", "relu1", "conv2", "relu2", "power"})
    EXPECT_EQ(net.blob_by_name(stays_plain)->layout(), Layout::kPlain) << stays_plain;
  // conv3 -> relu3 -> pool3: the run goes through the ReLU.
  EXPECT_NE(net.blob_by_name("conv3")->layout(), Layout::kPlain);
  EXPECT_EQ(net.blob_by_name("relu3")->layout(), net.blob_by_name("conv3")->layout());
  test::FillUniform(net.input_blobs()[0], -1.f, 1.f, 3);
  test::FillUniform(expected.input_blobs()[0], -1.f, 1.f, 3);
  net.Forward();
  expected.Forward();
  for (const char* output : {"relu1", "power", "pool3"}) {
    const std::vector<float> want = test::DataOf(*expected.blob_by_name(output));
    const std::vector<float> got = test::DataOf(*net.blob_by_name(output));
    ASSERT_EQ(got.size(), want.size()) << output;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << output << " at " << i;
  }
}

// A Concat of a channel-blocked bottom and a channels-last one (a convolution after a reduction to 20 channels,
// which blocks would pad: GoogLeNet's 5x5 branches) keeps its top in the blocked one's layout, every part starting on
// a block, rather than plain; outputs and gradients are those of the net with every blob plain.
TEST(NetPassesTest, PlanLayoutsJoinsMixedLayoutsIntoChannelBlocks) {
#ifndef CREMA_USE_ONEDNN
  GTEST_SKIP() << "no engine offers a layout other than plain in a build without oneDNN";
#endif
  const auto conv = [](const std::string& name, const std::string& bottom, int outputs) {
    return "layer { name: '" + name + "' type: 'Convolution' bottom: '" + bottom + "' top: '" + name +
           "' convolution_param { num_output: " + std::to_string(outputs) +
           " kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: "
           "0.1 } } }";
  };
  const NetParameter param = ParseNet(
      "name: 'mixed' force_backward: true\n"
      "layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 16 dim: 8 dim: 8 } } }" +
      conv("wide", "data", 16) + conv("reduce", "data", 20) + conv("narrow", "reduce", 16) +
      "layer { name: 'join' type: 'Concat' bottom: 'wide' bottom: 'narrow' top: 'join' }"
      "layer { name: 'pool' type: 'Pooling' bottom: 'join' top: 'pool'"
      " pooling_param { pool: MAX kernel_size: 2 stride: 2 } }");
  Net expected(param, std::make_shared<Context>(Device::kCPU, 0, 5), PassesWithoutPlanLayouts());
  Net net(param, std::make_shared<Context>(Device::kCPU, 0, 5));
  ASSERT_EQ(net.layer_by_name("join")->engine(), "onednn");
  const Layout blocked = net.blob_by_name("wide")->layout();
  ASSERT_TRUE(blocked == Layout::kChannelBlocks8 || blocked == Layout::kChannelBlocks16) << LayoutName(blocked);
  EXPECT_EQ(net.blob_by_name("narrow")->layout(), Layout::kChannelsLast);
  EXPECT_EQ(net.blob_by_name("join")->layout(), blocked);
  EXPECT_EQ(net.blob_by_name("pool")->layout(), Layout::kPlain);  // a net output
  for (Net* n : {&net, &expected}) {
    test::FillUniform(n->input_blobs()[0], -1.f, 1.f, 3);
    n->Forward();
    Blob* top = n->blob_by_name("pool");
    Blob gradient(top->shape());
    test::FillUniform(&gradient, -1.f, 1.f, 4);
    std::copy(gradient.cpu_data(), gradient.cpu_data() + gradient.count(), top->mutable_cpu_diff());
    n->Backward();
  }
  const auto expect_near = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << what << " at " << i;
  };
  expect_near(test::DataOf(*net.blob_by_name("pool")), test::DataOf(*expected.blob_by_name("pool")), "pool");
  expect_near(test::DiffOf(*net.input_blobs()[0]), test::DiffOf(*expected.input_blobs()[0]), "input gradient");
  EXPECT_GT(test::AbsSum(test::DiffOf(*net.input_blobs()[0])), 0.0);
}

// After-weights passes run when asked (the inference tools ask once the weights are loaded), see the loaded
// weights, and run once.
TEST(NetPassesTest, AfterWeightsPassesSeeTheLoadedWeights) {
  const NetParameter param = ParseNet(ConvNet(2, 8, 8));
  Net trained(param, std::make_shared<Context>(Device::kCPU, 0, 7));
  NetParameter weights;
  trained.ToProto(&weights);
  NetPasses passes = NetPasses::Default();
  std::vector<float> seen;
  int runs = 0;
  passes.after_weights.push_back({"record_conv_weights", [&](Net* net) {
                                    seen = test::DataOf(*net->layer_by_name("conv")->params()[0]);
                                    ++runs;
                                  }});
  Net net(param, nullptr, passes);
  EXPECT_EQ(runs, 0);  // not at build time
  net.CopyTrainedLayersFrom(weights);
  net.RunAfterWeightsPasses();
  net.RunAfterWeightsPasses();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(seen, test::DataOf(*trained.layer_by_name("conv")->params()[0]));
  EXPECT_EQ(net.passes_run().back(), "record_conv_weights");
}

// Parameter passes can be replaced: a net built with a pass of the caller's own (renaming every layer) shows it.
TEST(NetPassesTest, ParameterPassesAreAList) {
  NetPasses passes = NetPasses::Default();
  passes.parameter.push_back({"prefix_names", [](const NetParameter& in) {
                                NetParameter out = in;
                                for (auto& layer : *out.mutable_layer()) layer.set_name("x_" + layer.name());
                                return out;
                              }});
  Net net(ParseNet(ConvNet(2, 8, 8)), nullptr, passes);
  EXPECT_TRUE(net.has_layer("x_conv"));
  EXPECT_TRUE(net.has_layer("x_flat_x_flat_0_split") || net.has_layer("x_flat_flat_0_split"));
}

// Item 7: each parameter's gradient is reported once per backward, as soon as no later step can add to it:
// at that moment it already holds its final value. A shared parameter is reported after its earliest user.
TEST(NetGradientHookTest, EachGradientIsReportedOnceWhenComplete) {
  Net net(ParseNet(R"(
    force_backward: true
    layer { name: 'input' type: 'Input' top: 'a' top: 'label'
            input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'a' top: 'h1' param { name: 'shared' }
            inner_product_param { num_output: 3 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'h1' top: 'h2'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' } } }
    layer { name: 'ip3' type: 'InnerProduct' bottom: 'h2' top: 'h3' param { name: 'shared' }
            inner_product_param { num_output: 3 bias_term: false weight_filler { type: 'gaussian' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'h3' bottom: 'label' top: 'loss' })"));
  ASSERT_EQ(net.learnable_params().size(), 3u);  // the shared weights, ip2's weights and bias
  test::FillGaussian(net.blob_by_name("a"));
  std::vector<int> order;
  std::vector<std::vector<float>> at_report(3);
  net.set_gradient_ready_callback([&](int index) {
    order.push_back(index);
    at_report[index] = test::DiffOf(*net.learnable_params()[index]);
  });
  net.ClearParamDiffs();
  net.ForwardBackward();
  // Backward runs ip3, ip2, ip1: ip2's parameters are complete first, the shared weights only after ip1.
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(at_report[p], test::DiffOf(*net.learnable_params()[p])) << p;
    EXPECT_GT(test::AbsSum(at_report[p]), 0.0) << p;
  }
  EXPECT_EQ(net.gradient_ready_step(0), 1);  // the step of ip1 (after input)
}

// A pass that removes every Power step (the test's Power layers leave their input as it is); the tables the net
// derives from its steps are the net's to derive again.
void RemovePowerSteps(Net* net) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  const auto is_power = [&](const PlanStep& step) { return net->layers()[step.layer]->type() == std::string("Power"); };
  plan.erase(std::remove_if(plan.begin(), plan.end(), is_power), plan.end());
}

// Steps and layers are separate lists: a pass that removes a step (here an identity Power run in place, as an
// inference pass would drop Dropout) shifts every later step's index away from its layer's. The tables the net
// derives from its steps follow: each gradient is still reported once, after the backward of the step that
// completes it, and an update made from the hook (as a data-parallel reducer would start one) trains exactly as
// the same net written without the removed layer.
TEST(NetGradientHookTest, APassThatRemovesAStepKeepsHooksAndUpdatesRight) {
  const std::string head = R"(
    force_backward: true
    layer { name: 'input' type: 'Input' top: 'a' top: 'target'
            input_param { shape { dim: 4 dim: 5 } shape { dim: 4 dim: 5 } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'a' top: 'h1' param { name: 'shared' }
            inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.5 } } })";
  const std::string identity = R"(
    layer { name: 'same' type: 'Power' bottom: 'h1' top: 'h1' })";
  const std::string tail = R"(
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'h1' top: 'h2' param { name: 'shared' }
            inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.5 }
                                  bias_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'ip3' type: 'InnerProduct' bottom: 'h2' top: 'h3'
            inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'loss' type: 'EuclideanLoss' bottom: 'h3' bottom: 'target' top: 'loss' })";
  NetPasses passes = NetPasses::Default();
  passes.after_build.insert(passes.after_build.begin(), {"remove_power_steps", RemovePowerSteps});
  Net pruned(ParseNet(head + identity + tail), std::make_shared<Context>(Device::kCPU, 0, 7), passes);
  Net plain(ParseNet(head + tail), std::make_shared<Context>(Device::kCPU, 0, 7));
  ASSERT_EQ(pruned.layers().size(), 6u);
  ASSERT_EQ(pruned.plan().size(), 5u);
  ASSERT_EQ(pruned.layer_names()[pruned.plan()[2].layer], "ip2");  // step 2 runs layer 3
  // The shared weights and ip1's bias, ip2's bias, ip3's weights and bias.
  ASSERT_EQ(pruned.learnable_params().size(), 5u);
  ASSERT_EQ(plain.learnable_params().size(), 5u);
  for (size_t p = 0; p < 5; ++p) {
    ASSERT_EQ(test::DataOf(*pruned.learnable_params()[p]), test::DataOf(*plain.learnable_params()[p])) << p;
    // The step that completes the parameter runs a layer that uses it, and is the earliest such step.
    const int step = pruned.gradient_ready_step(static_cast<int>(p));
    ASSERT_GE(step, 0);
    const auto& uses = pruned.layers()[pruned.plan()[step].layer]->params();
    EXPECT_TRUE(std::any_of(uses.begin(), uses.end(), [&](const std::shared_ptr<Blob>& blob) {
      return blob->data() == pruned.learnable_params()[p]->data();
    })) << p;
    EXPECT_EQ(step, plain.gradient_ready_step(static_cast<int>(p))) << p;
  }
  EXPECT_EQ(pruned.gradient_ready_step(0), 1);  // the shared weights: after ip1, their earliest user

  const float rate = 0.05f;
  // The pruned net is updated from the hook, parameter by parameter as each is reported; the plain one after
  // its whole backward. Reported early, a parameter would be updated from a partial gradient, or its new value
  // would be read by a backward step still to run.
  std::vector<int> reports(5, 0);
  pruned.set_gradient_ready_callback([&](int index) {
    ++reports[index];
    Blob& param = *pruned.learnable_params()[index];
    for (int i = 0; i < param.count(); ++i) param.mutable_cpu_data()[i] -= rate * param.cpu_diff()[i];
  });
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (Net* net : {&pruned, &plain}) {
      test::FillGaussian(net->blob_by_name("a"), 0.f, 1.f, 10 + iteration);
      test::FillGaussian(net->blob_by_name("target"), 0.f, 1.f, 20 + iteration);
      net->ClearParamDiffs();
    }
    const float pruned_loss = pruned.ForwardBackward();
    const float plain_loss = plain.ForwardBackward();
    EXPECT_EQ(pruned_loss, plain_loss) << iteration;
    EXPECT_GT(plain_loss, 0.f);
    for (Blob* param : plain.learnable_params())
      for (int i = 0; i < param->count(); ++i) param->mutable_cpu_data()[i] -= rate * param->cpu_diff()[i];
    for (size_t p = 0; p < 5; ++p)
      EXPECT_EQ(test::DataOf(*pruned.learnable_params()[p]), test::DataOf(*plain.learnable_params()[p]))
          << "parameter " << p << " after iteration " << iteration;
  }
  EXPECT_EQ(reports, (std::vector<int>(5, 3)));
}

// Lifetimes (net/lifetimes.hpp) on a chain whose every buffer's first and last use are worked out by hand: five
// steps (input, ip1, relu, ip2, loss), so forward is positions 0-4 and backward runs loss, ip2, relu, ip1 at 5-8
// (the input step runs no backward) and ends at 9.
TEST(NetLifetimesTest, EachBufferLivesFromItsFirstToItsLastUse) {
  Net net(ParseNet(R"(
    memory_plan: NONE
    layer { name: 'input' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 10 } shape { dim: 4 } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'h1' inner_product_param { num_output: 8 } }
    layer { name: 'relu' type: 'ReLU' bottom: 'h1' top: 'r1' }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'r1' top: 'h2' inner_product_param { num_output: 3 } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'h2' bottom: 'label' top: 'loss' })"));
  ASSERT_EQ(net.plan().size(), 5u);
  struct Expected {
    std::string blob;
    bool gradient;
    int first, last;
  };
  const auto check = [&](bool with_backward, const std::vector<Expected>& expected) {
    SCOPED_TRACE(with_backward ? "forward and backward" : "forward");
    const NetLifetimes lifetimes = ComputeLifetimes(net, with_backward);
    EXPECT_EQ(lifetimes.positions, with_backward ? 10 : 5);
    ASSERT_EQ(lifetimes.buffers.size(), expected.size());
    std::vector<long long> live(lifetimes.positions, 0);
    size_t total = 0;
    for (const Expected& e : expected) {
      const auto found = std::find_if(lifetimes.buffers.begin(), lifetimes.buffers.end(), [&](const BufferLifetime& b) {
        return b.blob == e.blob && b.gradient == e.gradient;
      });
      ASSERT_NE(found, lifetimes.buffers.end()) << e.blob << (e.gradient ? " gradient" : " data");
      EXPECT_EQ(found->first, e.first) << e.blob << (e.gradient ? " gradient" : " data");
      EXPECT_EQ(found->last, e.last) << e.blob << (e.gradient ? " gradient" : " data");
      const size_t bytes = net.blob_by_name(e.blob)->count() * sizeof(float);
      EXPECT_EQ(found->bytes, bytes) << e.blob;
      total += bytes;
      for (int p = e.first; p <= e.last; ++p) live[p] += static_cast<long long>(bytes);
    }
    EXPECT_EQ(lifetimes.total_bytes, total);
    const auto peak = std::max_element(live.begin(), live.end());
    EXPECT_EQ(lifetimes.peak_live_bytes, static_cast<size_t>(*peak));
    EXPECT_EQ(lifetimes.peak_position, static_cast<int>(peak - live.begin()));
    EXPECT_LT(lifetimes.peak_live_bytes, lifetimes.total_bytes);
  };
  // Forward: each blob from its writer to its last reader; the loss (the output) and the softmax's kept
  // probabilities at the last step; the label from the start (the caller fills it) to the loss.
  check(false, {{"data", false, 0, 1},
                {"label", false, 0, 4},
                {"h1", false, 1, 2},
                {"r1", false, 2, 3},
                {"h2", false, 3, 4},
                {"loss", false, 4, 4},
                {"loss.probabilities", false, 4, 4}});
  // Forward and backward: what each backward reads keeps its input alive (ip1 the data, relu h1, ip2 r1, the
  // loss the labels and probabilities); h2 is read by no backward; each gradient lives from the backward that
  // writes it (the loss's from the forward that seeds it) to the one that reads it; the data needs none.
  check(true, {{"data", false, 0, 8},
               {"label", false, 0, 5},
               {"h1", false, 1, 7},
               {"r1", false, 2, 6},
               {"h2", false, 3, 4},
               {"loss", false, 4, 9},
               {"loss.probabilities", false, 4, 5},
               {"loss", true, 4, 5},
               {"h2", true, 5, 6},
               {"r1", true, 6, 7},
               {"h1", true, 7, 8}});
  EXPECT_EQ(ComputeLifetimes(net, false).total_bytes, net.activation_bytes());
}

}  // namespace
}  // namespace crema
