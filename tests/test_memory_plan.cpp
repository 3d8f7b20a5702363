// The memory plan (net/memory_plan.hpp): buffers live at the same time never share bytes, element layers run in
// place where their input is dead, a planned net computes bit for bit what an unplanned one does, and what its
// users read (inputs, outputs, kept blobs) stays readable. The example nets are checked in test_examples.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "layers/data/memory_data.hpp"
#include "layers/layer_registry.hpp"
#include "net/memory_plan.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Input, then InnerProduct, ReLU, InnerProduct, Sigmoid, InnerProduct and a loss (with an Accuracy beside it in
// TEST): ReLU's backward reads its bottom, Sigmoid's its top.
std::string Chain(const std::string& header = "") {
  return header + R"(
    name: 'chain'
    layer { name: 'input' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 10 } shape { dim: 4 } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'h1'
            inner_product_param { num_output: 16 weight_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'h1' top: 'r1' }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'r1' top: 'h2'
            inner_product_param { num_output: 16 weight_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'sigmoid2' type: 'Sigmoid' bottom: 'h2' top: 's2' }
    layer { name: 'ip3' type: 'InnerProduct' bottom: 's2' top: 'h3'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'h3' bottom: 'label' top: 'loss' }
    layer { name: 'accuracy' type: 'Accuracy' bottom: 'h3' bottom: 'label' top: 'accuracy'
            include { phase: TEST } })";
}

NetParameter ChainFor(Phase phase, const std::string& header = "") {
  NetParameter param = test::ParseNet(Chain(header));
  param.mutable_state()->set_phase(phase);
  return param;
}

// The same inputs in every net: random data, labels 0..2.
void FillInputs(Net* net, uint64_t seed) {
  test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, seed);
  Blob* label = net->blob_by_name("label");
  for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = static_cast<float>((i + seed) % 3);
}

// Every learnable parameter's gradient the same, bit for bit, in both nets; then one plain SGD step on each.
void ExpectSameGradientsThenStep(Net* planned, Net* unplanned) {
  for (size_t p = 0; p < planned->learnable_params().size(); ++p) {
    Blob* mine = planned->learnable_params()[p];
    Blob* theirs = unplanned->learnable_params()[p];
    ASSERT_EQ(test::DiffOf(*mine), test::DiffOf(*theirs)) << "parameter " << p;
    for (Blob* blob : {mine, theirs})
      for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] -= 0.1f * blob->cpu_diff()[i];
  }
}

bool Overlap(int first_a, int last_a, int first_b, int last_b) { return first_a <= last_b && first_b <= last_a; }

// Whether `taker` took `giver`'s memory in place at the step where one ends and the other starts.
bool InPlacePair(const PlannedBuffer& giver, const PlannedBuffer& taker) {
  return taker.in_place && giver.last == taker.first && giver.offset == taker.offset;
}

TEST(MemoryPlanTest, BuffersLiveAtOnceNeverShareBytes) {
  for (bool with_backward : {false, true}) {
    SCOPED_TRACE(with_backward ? "forward and backward" : "forward");
    Net net(ChainFor(with_backward ? TRAIN : TEST, "memory_plan: NONE"));
    ASSERT_EQ(net.memory_plan(), nullptr);
    const MemoryPlan plan = ComputeMemoryPlan(net, MemoryPlanOptions{with_backward, {}, {}});
    ASSERT_FALSE(plan.buffers.empty());
    EXPECT_EQ(plan.unplanned_bytes, ComputeLifetimes(net, with_backward).total_bytes + plan.unplanned_workspace_bytes);
    EXPECT_LT(plan.planned_bytes(), plan.unplanned_bytes);
    for (const PlannedBuffer& a : plan.buffers) {
      EXPECT_EQ(a.offset % kArenaAlignment, 0u);
      EXPECT_LE(a.offset + a.bytes, plan.arena_bytes);
      for (const PlannedBuffer& b : plan.buffers) {
        if (&a == &b || !Overlap(a.first, a.last, b.first, b.last) || InPlacePair(a, b) || InPlacePair(b, a)) continue;
        const bool disjoint = a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
        EXPECT_TRUE(disjoint) << net.blob_names()[a.owner] << (a.gradient ? " gradient" : "") << " [" << a.first << ", "
                              << a.last << "] at " << a.offset << " and " << net.blob_names()[b.owner]
                              << (b.gradient ? " gradient" : "") << " [" << b.first << ", " << b.last << "] at "
                              << b.offset;
      }
    }
    // Each step's workspace is a slot of the arena that no buffer live where the step runs, and no other workspace,
    // shares.
    ASSERT_FALSE(plan.workspaces.empty());
    for (const PlannedWorkspace& w : plan.workspaces) {
      EXPECT_EQ(w.offset % kArenaAlignment, 0u);
      EXPECT_LE(w.offset + w.bytes, plan.arena_bytes);
      const auto disjoint = [&](size_t offset, size_t bytes) {
        return w.offset + w.bytes <= offset || offset + bytes <= w.offset;
      };
      for (const PlannedBuffer& b : plan.buffers) {
        for (int position : w.positions) {
          if (b.first <= position && position <= b.last) {
            EXPECT_TRUE(disjoint(b.offset, b.bytes)) << "the workspace of step " << w.step << " and "
                                                     << net.blob_names()[b.owner] << (b.gradient ? " gradient" : "");
          }
        }
      }
      for (const PlannedWorkspace& other : plan.workspaces) {
        if (&other != &w) {
          EXPECT_TRUE(disjoint(other.offset, other.bytes) || other.positions != w.positions);
        }
      }
    }
    // The inputs and the outputs keep memory of their own.
    for (const PlannedBuffer& buffer : plan.buffers) {
      const std::string& name = net.blob_names()[buffer.owner];
      EXPECT_TRUE(name != "data" && name != "label" && (buffer.gradient || (name != "loss" && name != "accuracy")))
          << name;
    }
  }
}

// The buffers a plan runs in place, as "blob" or "blob gradient".
std::vector<std::string> InPlaceBuffers(const Net& net, const MemoryPlan& plan) {
  std::vector<std::string> names;
  for (const PlannedBuffer& buffer : plan.buffers)
    if (buffer.in_place) names.push_back(net.blob_names()[buffer.owner] + (buffer.gradient ? " gradient" : ""));
  std::sort(names.begin(), names.end());
  return names;
}

// Forward alone, both element layers write over their dead inputs. Training: ReLU's backward reads h1, so r1
// needs memory of its own, while Sigmoid's reads its top, so s2 still takes h2's; backward, each layer's bottom
// gradient takes its top gradient's memory.
TEST(MemoryPlanTest, ElementLayersRunInPlaceWhereTheirInputIsDead) {
  Net forward(ChainFor(TEST, "memory_plan: NONE"));
  EXPECT_EQ(InPlaceBuffers(forward, ComputeMemoryPlan(forward, MemoryPlanOptions{false, {}, {}})),
            (std::vector<std::string>{"r1", "s2"}));
  Net training(ChainFor(TRAIN, "memory_plan: NONE"));
  EXPECT_EQ(InPlaceBuffers(training, ComputeMemoryPlan(training, MemoryPlanOptions{true, {}, {}})),
            (std::vector<std::string>{"h1 gradient", "h2 gradient", "s2"}));
}

// Several iterations of SGD on two nets, one planned and one not: losses, outputs, parameter gradients and
// parameters agree bit for bit.
TEST(MemoryPlanTest, APlannedNetTrainsBitForBitAsAnUnplannedOne) {
  Net planned(ChainFor(TRAIN));
  Net unplanned(ChainFor(TRAIN, "memory_plan: NONE"));
  ASSERT_NE(planned.memory_plan(), nullptr);
  EXPECT_TRUE(planned.memory_plan()->with_backward);
  EXPECT_GT(planned.memory_plan()->in_place, 0);
  ASSERT_EQ(unplanned.memory_plan(), nullptr);
  // The layers' workspaces are slots of the arena: the shared one is empty.
  EXPECT_FALSE(planned.memory_plan()->workspaces.empty());
  EXPECT_EQ(planned.workspace_bytes(), 0u);
  EXPECT_GT(unplanned.workspace_bytes(), 0u);
  for (size_t p = 0; p < planned.learnable_params().size(); ++p)
    unplanned.learnable_params()[p]->FromProto([&] {
      BlobProto proto;
      planned.learnable_params()[p]->ToProto(&proto);
      return proto;
    }());
  for (int iteration = 0; iteration < 4; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    for (Net* net : {&planned, &unplanned}) {
      FillInputs(net, 10 + iteration);
      net->ClearParamDiffs();
    }
    const float loss = planned.ForwardBackward();
    EXPECT_EQ(loss, unplanned.ForwardBackward());
    EXPECT_GT(loss, 0.f);
    ExpectSameGradientsThenStep(&planned, &unplanned);
    EXPECT_EQ(test::DiffOf(*planned.blob_by_name("data")), test::DiffOf(*unplanned.blob_by_name("data")));
  }
}

// The host rehearsal of the GPU code (Context::set_gpu_code_on_host) runs the layers' GPU slots over the same arena
// logic (one SyncedMemory, the blobs views of it): planned and unplanned agree bit for bit there too.
// A ResNet's unit: Convolution, then BatchNorm, Scale and ReLU in place on its output. Planned for backward, the
// Scale reads the normalized values BatchNorm keeps instead of keeping a copy of its own (Layer::BorrowKeptInput),
// and the blob they share is not kept for backward (Layer::BackwardReadsInPlace), with each BatchNorm engine of the
// CPU and the host rehearsal of the native engine's GPU code; training gives the unplanned net's numbers bit for
// bit, and without the plan the Scale copies again.
// A ResNet's unit on `bottom`: Convolution 'conv<suffix>' (3x3, `outputs` channels), then BatchNorm 'bn<suffix>', Scale
// 'scale<suffix>' and ReLU 'relu<suffix>' in place on its output.
std::string ConvolutionUnit(const std::string& suffix, const std::string& bottom, int outputs) {
  const std::string conv = "conv" + suffix;
  return "layer { name: '" + conv + "' type: 'Convolution' bottom: '" + bottom + "' top: '" + conv +
         "' convolution_param { num_output: " + std::to_string(outputs) +
         " kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
         "layer { name: 'bn" +
         suffix + "' type: 'BatchNorm' bottom: '" + conv + "' top: '" + conv +
         "' }\n"
         "layer { name: 'scale" +
         suffix + "' type: 'Scale' bottom: '" + conv + "' top: '" + conv +
         "' scale_param { bias_term: true filler { type: 'gaussian' } bias_filler { type: 'gaussian' } } }\n"
         "layer { name: 'relu" +
         suffix + "' type: 'ReLU' bottom: '" + conv + "' top: '" + conv + "' }\n";
}

TEST(MemoryPlanTest, AScaleAfterBatchNormReadsTheNormalizedValuesItKeeps) {
  const std::string text = R"(
    name: 'unit'
    layer { name: 'input' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } shape { dim: 4 } } })" +
                           ConvolutionUnit("", "data", 16) + R"(
    layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' })";
  // Each CPU engine, and the host rehearsal of the GPU code of each engine that runs on both devices.
  std::vector<std::pair<std::string, bool>> runs;
  const std::vector<std::string> on_gpu = LayerRegistry::Global().Engines("BatchNorm", Device::kGPU);
  for (const std::string& engine : LayerRegistry::Global().Engines("BatchNorm", Device::kCPU)) {
    runs.emplace_back(engine, false);
    if (std::find(on_gpu.begin(), on_gpu.end(), engine) != on_gpu.end()) runs.emplace_back(engine, true);
  }
  ASSERT_GE(runs.size(), 2u);
  for (const auto& [engine, rehearsal] : runs) {
    SCOPED_TRACE("BatchNorm engine " + engine + (rehearsal ? ", GPU code on the host" : ""));
    std::unique_ptr<Net> nets[2];
    for (int planned = 0; planned < 2; ++planned) {
      auto context = std::make_shared<Context>(Device::kCPU, 0, 5);
      context->set_gpu_code_on_host(rehearsal);
      if (rehearsal) context->ForceEngines("native");  // every layer's code for both devices
      context->force_engine("BatchNorm", engine);
      NetParameter param = test::ParseNet(text);
      if (!planned) param.set_memory_plan(NetParameter::NONE);
      param.mutable_state()->set_phase(TRAIN);
      param.set_fold(false);  // the separate layers (fused, the BatchNorm runs the Scale: net/fuse.hpp)
      nets[planned] = std::make_unique<Net>(param, context);
    }
    Net& planned = *nets[1];
    Net& unplanned = *nets[0];
    ASSERT_NE(planned.memory_plan(), nullptr);
    const Blob& scale_copy = *planned.layer_by_name("scale")->internal_blobs().at(0);
    EXPECT_EQ(scale_copy.count(), 0) << "the Scale still copies its input under a plan";
    EXPECT_EQ(unplanned.layer_by_name("scale")->internal_blobs().at(0)->count(), 4 * 16 * 6 * 6);
    // The unplanned figure (memory_plan: NONE's) counts the Scale's copy; the buffers the plan placed do not.
    EXPECT_EQ(planned.memory_plan()->unplanned_bytes - planned.memory_plan()->unplanned_workspace_bytes -
                  planned.memory_plan()->lifetimes.total_bytes,
              4 * 16 * 6 * 6 * sizeof(float));
    // Every layer's blobs (BatchNorm's statistics too), the same in both nets.
    const auto blobs_of = [](const Net& net) {
      std::vector<Blob*> blobs;
      for (const auto& layer : net.layers())
        for (const auto& blob : layer->params()) blobs.push_back(blob.get());
      return blobs;
    };
    ASSERT_EQ(blobs_of(planned).size(), blobs_of(unplanned).size());
    for (size_t p = 0; p < blobs_of(planned).size(); ++p) {
      BlobProto proto;
      blobs_of(planned)[p]->ToProto(&proto);
      blobs_of(unplanned)[p]->FromProto(proto);
    }
    for (int iteration = 0; iteration < 3; ++iteration) {
      SCOPED_TRACE("iteration " + std::to_string(iteration));
      for (Net* net : {&planned, &unplanned}) {
        test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, 40 + iteration);
        Blob* label = net->blob_by_name("label");
        for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = static_cast<float>((i + iteration) % 3);
        net->ClearParamDiffs();
      }
      EXPECT_EQ(planned.ForwardBackward(), unplanned.ForwardBackward());
      ExpectSameGradientsThenStep(&planned, &unplanned);
    }
    for (size_t p = 0; p < blobs_of(planned).size(); ++p)
      EXPECT_EQ(test::DataOf(*blobs_of(planned)[p]), test::DataOf(*blobs_of(unplanned)[p])) << "blob " << p;
    planned.UnplanMemory();
    EXPECT_EQ(scale_copy.count(), 4 * 16 * 6 * 6) << "without the plan the Scale copies its input again";
    for (Net* net : {&planned, &unplanned}) {
      test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, 50);
      net->ClearParamDiffs();
    }
    EXPECT_EQ(planned.ForwardBackward(), unplanned.ForwardBackward());
    for (size_t p = 0; p < planned.learnable_params().size(); ++p)
      EXPECT_EQ(test::DiffOf(*planned.learnable_params()[p]), test::DiffOf(*unplanned.learnable_params()[p]));
  }
}

TEST(MemoryPlanTest, TheHostRehearsalOfGpuCodeTrainsBitForBitAsUnplanned) {
  std::vector<std::vector<float>> results[2];
  for (bool plan : {false, true}) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, 77);
    context->ForceEngines("native");
    context->set_gpu_code_on_host(true);
    context->set_plan_memory(plan);
    Net net(ChainFor(TRAIN), context);
    ASSERT_EQ(net.memory_plan() != nullptr, plan);
    for (int iteration = 0; iteration < 3; ++iteration) {
      FillInputs(&net, 20 + iteration);
      net.ClearParamDiffs();
      results[plan].push_back({net.ForwardBackward()});
      for (Blob* param : net.learnable_params()) {
        results[plan].push_back(test::DiffOf(*param));
        for (int i = 0; i < param->count(); ++i) param->mutable_cpu_data()[i] -= 0.1f * param->cpu_diff()[i];
      }
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[1][i], results[0][i]) << "result " << i;
}

// A net with learnable layers is planned for backward too, whatever its phase (Caffe runs a TEST net backward when
// asked); planned for forward alone, its outputs match the unplanned net's, a blob a later step overwrote is
// marked so, a kept blob keeps its values, and backward is refused with the way out.
TEST(MemoryPlanTest, AForwardOnlyNetKeepsWhatItsUsersRead) {
  Net planned(ChainFor(TEST));
  Net unplanned(ChainFor(TEST, "memory_plan: NONE"));
  ASSERT_NE(planned.memory_plan(), nullptr);
  EXPECT_TRUE(planned.memory_plan()->with_backward);
  const size_t with_backward = planned.memory_plan()->planned_bytes();
  planned.PlanMemory(false);
  EXPECT_FALSE(planned.memory_plan()->with_backward);
  EXPECT_LT(planned.memory_plan()->planned_bytes(), with_backward);
  unplanned.ShareTrainedLayersWith(planned);
  for (Net* net : {&planned, &unplanned}) FillInputs(net, 3);
  EXPECT_EQ(planned.Forward(), unplanned.Forward());
  EXPECT_EQ(test::DataOf(*planned.blob_by_name("accuracy")), test::DataOf(*unplanned.blob_by_name("accuracy")));
  const size_t unkept_bytes = planned.memory_plan()->planned_bytes();
  // h1 is dead once ReLU read it, and its memory holds r1 now: the non-finite search must not trust it.
  const auto reused = [&](const std::string& name) {
    for (const PlannedBuffer& buffer : planned.memory_plan()->buffers)
      if (!buffer.gradient && planned.blob_names()[buffer.owner] == name) return buffer.reused_in_forward;
    return false;
  };
  EXPECT_TRUE(reused("h1"));
  planned.KeepBlobs({"h1", "h2"});
  EXPECT_GT(planned.memory_plan()->planned_bytes(), unkept_bytes);
  EXPECT_FALSE(reused("h1"));
  planned.Forward();
  EXPECT_EQ(test::DataOf(*planned.blob_by_name("h1")), test::DataOf(*unplanned.blob_by_name("h1")));
  EXPECT_EQ(test::DataOf(*planned.blob_by_name("h2")), test::DataOf(*unplanned.blob_by_name("h2")));
  EXPECT_NE(test::ErrorMessage([&] { planned.KeepBlobs({"no_such_blob"}); }).find("no_such_blob"), std::string::npos);
  const std::string refusal = test::ErrorMessage([&] { planned.Backward(); });
  EXPECT_NE(refusal.find("forward passes only"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("PlanMemory(true)"), std::string::npos) << refusal;
  planned.PlanMemory(true);
  FillInputs(&planned, 4);
  FillInputs(&unplanned, 4);
  EXPECT_EQ(planned.ForwardBackward(), unplanned.ForwardBackward());
  EXPECT_EQ(test::DiffOf(*planned.blob_by_name("data")), test::DiffOf(*unplanned.blob_by_name("data")));
}

// A new input shape plans again (a larger arena), and the outputs still match.
TEST(MemoryPlanTest, ANewInputShapePlansAgain) {
  Net planned(ChainFor(TEST));
  Net unplanned(ChainFor(TEST, "memory_plan: NONE"));
  unplanned.ShareTrainedLayersWith(planned);
  const size_t arena = planned.memory_plan()->arena_bytes;
  for (Net* net : {&planned, &unplanned}) {
    net->blob_by_name("data")->Reshape({9, 10});
    net->blob_by_name("label")->Reshape({9});
    FillInputs(net, 5);
  }
  EXPECT_EQ(planned.Forward(), unplanned.Forward());
  ASSERT_NE(planned.memory_plan(), nullptr);
  EXPECT_GT(planned.memory_plan()->arena_bytes, arena);
  EXPECT_EQ(planned.blob_by_name("h3")->shape(), (std::vector<int>{9, 3}));
  EXPECT_EQ(test::DataOf(*planned.blob_by_name("accuracy")), test::DataOf(*unplanned.blob_by_name("accuracy")));
}

// Planned for forward alone, the layers are told no backward runs: an in-place Scale keeps no copy of its input,
// and gives what it gives with the copy; planned for backward again, the copy is back.
TEST(MemoryPlanTest, InPlaceLayersKeepNoCopyWhereNoBackwardRuns) {
  const std::string header = R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 4 } } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'h'
            inner_product_param { num_output: 6 axis: 1 weight_filler { type: 'gaussian' std: 0.5 } } }
    layer { name: 'scale' type: 'Scale' bottom: 'h' top: 'h' scale_param { filler { type: 'gaussian' } } }
    layer { name: 'out' type: 'InnerProduct' bottom: 'h' top: 'out' inner_product_param { num_output: 2 } })";
  Net planned(test::ParseNet("force_backward: true" + header));
  Net unplanned(test::ParseNet("force_backward: true memory_plan: NONE" + header));
  unplanned.ShareTrainedLayersWith(planned);
  ASSERT_EQ(planned.blob_by_name("scale.input")->count(), 6 * 2);
  planned.PlanMemory(false);
  EXPECT_EQ(planned.blob_by_name("scale.input")->count(), 0);
  for (Net* net : {&planned, &unplanned}) test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, 9);
  planned.Forward();
  unplanned.Forward();
  EXPECT_EQ(test::DataOf(*planned.blob_by_name("out")), test::DataOf(*unplanned.blob_by_name("out")));
  planned.PlanMemory(true);
  EXPECT_EQ(planned.blob_by_name("scale.input")->count(), 6 * 2);
}

// memory_plan: NONE, a context that turns plans off, debug_info and UnplanMemory all leave every blob its memory.
TEST(MemoryPlanTest, ThePlanCanBeTurnedOff) {
  EXPECT_EQ(Net(ChainFor(TEST, "memory_plan: NONE")).memory_plan(), nullptr);
  EXPECT_EQ(Net(ChainFor(TEST, "debug_info: true")).memory_plan(), nullptr);
  auto context = std::make_shared<Context>();
  context->set_plan_memory(false);
  EXPECT_EQ(Net(ChainFor(TRAIN), context).memory_plan(), nullptr);
  Net net(ChainFor(TRAIN));
  ASSERT_NE(net.memory_plan(), nullptr);
  EXPECT_TRUE(net.blob_by_name("h2")->data_is_view());  // a slot of the arena
  EXPECT_TRUE(net.blob_by_name("h2")->diff_is_view());
  net.UnplanMemory();
  EXPECT_EQ(net.memory_plan(), nullptr);
  EXPECT_FALSE(net.blob_by_name("h2")->data_is_view());
  EXPECT_FALSE(net.blob_by_name("h2")->diff_is_view());
  EXPECT_NE(net.blob_by_name("h1")->data().get(), net.blob_by_name("h2")->data().get());
  FillInputs(&net, 1);
  EXPECT_GT(net.ForwardBackward(), 0.f);
}

// ---------------------------------------------------------------------------------------------------------
// Recompute (net/schedule.hpp)

// What a replay must repeat exactly: a Convolution with BatchNorm (running statistics), Scale and ReLU in place on
// its output, stochastic pooling and Dropout (random draws), then a classifier.
std::string ReplayNet(const std::string& header = "") {
  return header + R"(
    name: 'replay'
    layer { name: 'input' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } shape { dim: 4 } } })" +
         ConvolutionUnit("1", "data", 8) + R"(
    layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1'
            pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 } }
    layer { name: 'conv2' type: 'Convolution' bottom: 'pool1' top: 'conv2'
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.3 } } }
    layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'conv2' }
    layer { name: 'drop2' type: 'Dropout' bottom: 'conv2' top: 'conv2' dropout_param { dropout_ratio: 0.5 } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'conv2' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' })";
}

// Every layer's parameters (BatchNorm's statistics too).
std::vector<Blob*> LayerParams(const Net& net) {
  std::vector<Blob*> blobs;
  for (const auto& layer : net.layers())
    for (const auto& blob : layer->params()) blobs.push_back(blob.get());
  return blobs;
}

// The steps a net's schedule replays, by layer name.
std::vector<std::string> ReplayedLayers(const Net& net) {
  std::vector<std::string> names;
  const PassSchedule schedule = net.schedule();
  for (size_t s = 0; s < net.plan().size(); ++s)
    if (schedule.replayed[s]) names.push_back(net.layer_names()[net.plan()[s].layer]);
  return names;
}

// Trains `recomputed` and `stored` side by side (the same parameters and inputs) and expects bit-identical losses,
// gradients, statistics and updated parameters after each of several iterations.
void ExpectSameTraining(Net* recomputed, Net* stored) {
  ASSERT_EQ(LayerParams(*recomputed).size(), LayerParams(*stored).size());
  for (size_t p = 0; p < LayerParams(*stored).size(); ++p) {
    BlobProto proto;
    LayerParams(*stored)[p]->ToProto(&proto);
    LayerParams(*recomputed)[p]->FromProto(proto);
  }
  for (int iteration = 0; iteration < 4; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    for (Net* net : {recomputed, stored}) {
      test::FillGaussian(net->blob_by_name("data"), 0.f, 1.f, 60 + iteration);
      Blob* label = net->blob_by_name("label");
      for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = static_cast<float>((i + iteration) % 3);
      net->ClearParamDiffs();
    }
    const float loss = recomputed->ForwardBackward();
    EXPECT_EQ(loss, stored->ForwardBackward());
    EXPECT_GT(loss, 0.f);
    EXPECT_EQ(test::DiffOf(*recomputed->blob_by_name("data")), test::DiffOf(*stored->blob_by_name("data")));
    ExpectSameGradientsThenStep(recomputed, stored);
    for (size_t p = 0; p < LayerParams(*stored).size(); ++p)
      EXPECT_EQ(test::DataOf(*LayerParams(*recomputed)[p]), test::DataOf(*LayerParams(*stored)[p])) << "blob " << p;
  }
}

// `fold`: whether bn1 runs scale1 and relu1 (net/fuse.hpp); the separate layers by default.
NetParameter ReplayNetFor(const std::string& header, bool fold = false) {
  NetParameter param = test::ParseNet(ReplayNet(header));
  param.mutable_state()->set_phase(TRAIN);
  param.set_fold(fold);
  return param;
}

// Replays draw the random numbers the first forward drew (stochastic pooling's picks, Dropout's mask) and leave
// BatchNorm's running statistics as one forward leaves them: with a segment at every place one may begin (every
// replayable step whose values backward reads runs twice), training equals training without a plan bit for bit,
// on the CPU (the separate layers, and bn1 running scale1 and relu1 as training fuses them) and in the host
// rehearsal of the GPU code.
TEST(MemoryPlanTest, RecomputeReplaysRandomLayersAndBatchNormExactly) {
  for (int run = 0; run < 3; ++run) {
    const bool rehearsal = run == 2, fused = run == 1;
    SCOPED_TRACE(rehearsal ? "GPU code on the host" : fused ? "CPU, fused" : "CPU");
    std::unique_ptr<Net> nets[2];
    for (int recompute = 0; recompute < 2; ++recompute) {
      auto context = std::make_shared<Context>(Device::kCPU, 0, 9);
      context->set_gpu_code_on_host(rehearsal);
      if (rehearsal) context->ForceEngines("native");
      nets[recompute] = std::make_unique<Net>(
          ReplayNetFor(recompute ? "memory_plan: RECOMPUTE" : "memory_plan: NONE", fused), context);
    }
    Net& recomputed = *nets[1];
    // bn1 runs scale1 and relu1, and conv2 relu2 on oneDNN's engine.
    const bool relu2_fused = fused && recomputed.layer_by_name("conv2")->engine() == "onednn";
    EXPECT_EQ(recomputed.rewrites().size(), fused ? (relu2_fused ? 2u : 1u) : 0u);
    recomputed.RecomputeSegments(SegmentCuts(recomputed));
    ASSERT_NE(recomputed.memory_plan(), nullptr);
    const std::vector<std::string> replayed = ReplayedLayers(recomputed);
    std::vector<std::string> expected = {"conv1", "bn1", "scale1", "relu1", "pool1", "conv2", "relu2", "drop2"};
    if (fused) expected = {"conv1", "bn1", "pool1", "conv2", "relu2", "drop2"};
    if (relu2_fused) expected = {"conv1", "bn1", "pool1", "conv2", "drop2"};
    for (const std::string& layer : expected)
      EXPECT_NE(std::find(replayed.begin(), replayed.end(), layer), replayed.end()) << layer << " is not replayed";
    ExpectSameTraining(&recomputed, nets[0].get());
  }
}

// A segment never begins inside an in-place chain (the value at the cut would be overwritten by the chain's later
// layers): here only before conv1 and after it, relu1, pool1 and the rest.
TEST(MemoryPlanTest, SegmentsNeverCutAnInPlaceChain) {
  Net net(ReplayNetFor("memory_plan: NONE"));
  std::vector<std::string> starts;
  for (int cut : SegmentCuts(net)) starts.push_back(net.layer_names()[net.plan()[cut].layer]);
  EXPECT_EQ(starts, (std::vector<std::string>{"conv1", "pool1", "conv2", "ip", "loss"}));
  EXPECT_THROW(net.RecomputeSegments({0, 3}), Error);  // between bn1 and scale1
}

// The buffers a replay writes live twice, from forward to their last forward reader and from the replay to their
// last backward reader; no two buffers live at one position share a byte, with one arena for every interval.
TEST(MemoryPlanTest, ReplayedBuffersLiveTwiceAndNeverShareBytesWithOthersLiveThen) {
  Net net(ReplayNetFor("memory_plan: NONE"));
  MemoryPlanOptions options{true, {}, {}};
  options.schedule = RecomputeSchedule(net, SegmentCuts(net), RecomputableSteps(net, true));
  ASSERT_GT(options.schedule.replays, 0);
  const MemoryPlan plan = ComputeMemoryPlan(net, options);
  int twice = 0;
  for (const PlannedBuffer& buffer : plan.buffers) twice += buffer.intervals.size() > 1 ? 1 : 0;
  EXPECT_GT(twice, 0);
  for (const PlannedBuffer& a : plan.buffers)
    for (const PlannedBuffer& b : plan.buffers) {
      if (&a == &b || a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset) continue;
      // Sharing bytes: only where one's interval ends at the step whose top takes the other's memory in place.
      for (const auto& x : a.intervals)
        for (const auto& y : b.intervals) {
          const bool overlap = x.first <= y.second && y.first <= x.second;
          const bool handed_over = (x.second == y.first && b.in_place) || (y.second == x.first && a.in_place);
          EXPECT_TRUE(!overlap || handed_over)
              << net.blob_names()[a.owner] << (a.gradient ? " gradient" : "") << " [" << x.first << ", " << x.second
              << "] and " << net.blob_names()[b.owner] << (b.gradient ? " gradient" : "") << " [" << y.first << ", "
              << y.second << "] share bytes";
        }
    }
}

// The per-layer mark: recompute: false keeps a layer's values under RECOMPUTE (and the layers after it in its in-place
// chain then cannot replay either: their input would be gone); recompute: true replays a layer in a net whose plan
// is SHARE. Both train bit for bit as without a plan.
TEST(MemoryPlanTest, TheRecomputeMarkChoosesLayers) {
  NetParameter stored_param = ReplayNetFor("memory_plan: NONE");
  {
    NetParameter param = ReplayNetFor("memory_plan: RECOMPUTE");
    for (LayerParameter& layer : *param.mutable_layer())
      if (layer.name() == "conv2") layer.set_recompute(false);
    Net net(param);
    net.RecomputeSegments(SegmentCuts(net));
    const std::vector<std::string> replayed = ReplayedLayers(net);
    EXPECT_EQ(std::find(replayed.begin(), replayed.end(), "conv2"), replayed.end());
    EXPECT_NE(std::find(replayed.begin(), replayed.end(), "bn1"), replayed.end());
    Net stored(stored_param);
    ExpectSameTraining(&net, &stored);
  }
  {
    NetParameter param = ReplayNetFor("");
    for (LayerParameter& layer : *param.mutable_layer())
      if (layer.name() == "pool1") layer.set_recompute(true);
    Net net(param);
    net.RecomputeSegments(SegmentCuts(net));
    EXPECT_EQ(ReplayedLayers(net), std::vector<std::string>{"pool1"});
    Net stored(stored_param);
    ExpectSameTraining(&net, &stored);
  }
}

// Twelve Convolution + ReLU (in place) units on 16 x 16 images, then a classifier: deep enough that recompute
// saves memory.
NetParameter DeepChainFor(const std::string& header) {
  std::string text = header + R"(
    name: 'deep'
    layer { name: 'input' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 8 dim: 16 dim: 16 } shape { dim: 4 } } })";
  std::string bottom = "data";
  for (int i = 1; i <= 12; ++i) {
    const std::string top = "conv" + std::to_string(i);
    text += "layer { name: '" + top + "' type: 'Convolution' bottom: '" + bottom + "' top: '" + top +
            "' convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } "
            "} } layer { name: 'relu" +
            std::to_string(i) + "' type: 'ReLU' bottom: '" + top + "' top: '" + top + "' }";
    bottom = top;
  }
  text += "layer { name: 'ip' type: 'InnerProduct' bottom: '" + bottom +
          "' top: 'ip' inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.01 } } } "
          "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }";
  NetParameter param = test::ParseNet(text);
  param.mutable_state()->set_phase(TRAIN);
  return param;
}

// RECOMPUTE chooses segments that take less memory than storing everything; with memory_budget between that and
// storing, it replays fewer steps and stays within the budget; both train bit for bit as without a plan.
TEST(MemoryPlanTest, RecomputeTakesLessMemoryAndABudgetRecomputesLess) {
  Net share(DeepChainFor(""));
  Net recompute(DeepChainFor("memory_plan: RECOMPUTE"));
  ASSERT_NE(share.memory_plan(), nullptr);
  ASSERT_NE(recompute.memory_plan(), nullptr);
  const size_t stored_bytes = share.memory_plan()->planned_bytes();
  const size_t least_bytes = recompute.memory_plan()->planned_bytes();
  const int most_replays = recompute.schedule().replays;
  EXPECT_EQ(share.schedule().replays, 0);
  EXPECT_GT(most_replays, 0);
  EXPECT_GT(recompute.schedule().segments.size(), 2u);
  EXPECT_LT(least_bytes, stored_bytes * 3 / 4);
  const size_t budget = (least_bytes + stored_bytes) / 2;
  Net budgeted(DeepChainFor("memory_plan: RECOMPUTE memory_budget: " + std::to_string(budget)));
  EXPECT_LE(budgeted.memory_plan()->planned_bytes(), budget);
  EXPECT_GT(budgeted.memory_plan()->planned_bytes(), least_bytes);
  EXPECT_LT(budgeted.schedule().replays, most_replays);
  Net enough(DeepChainFor("memory_plan: RECOMPUTE memory_budget: " + std::to_string(stored_bytes)));
  EXPECT_EQ(enough.schedule().replays, 0) << "a budget that storing fits needs no replay";
  for (Net* net : {&recompute, &budgeted}) {
    Net stored(DeepChainFor("memory_plan: NONE"));
    ExpectSameTraining(net, &stored);
  }
}

// What a layer holds for its whole life (a MemoryData layer's items, an engine's reordered weights) is no buffer of a
// pass: the net lists it beside the plan, largest first, with the layer it belongs to.
TEST(MemoryPlanTest, LayersListWhatTheyHoldBesideThePlan) {
  Net net(test::ParseNet(R"(name: 'held'
    layer { name: 'data' type: 'MemoryData' top: 'data' top: 'label'
            memory_data_param { batch_size: 2 channels: 3 height: 8 width: 8 } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 16 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'silence' type: 'Silence' bottom: 'conv' bottom: 'label' })"));
  EXPECT_TRUE(net.HeldBuffers().empty());
  std::vector<float> items(6 * 3 * 8 * 8, 0.5f), labels(6, 1.f);
  dynamic_cast<MemoryDataLayer&>(*net.layer_by_name("data")).Reset(items.data(), labels.data(), 6);
  net.Forward();
  const std::vector<Net::HeldBuffer> held = net.HeldBuffers();
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(net.layer_names()[held[0].layer], "data");
  EXPECT_EQ(held[0].buffer.bytes, sizeof(float) * (items.size() + labels.size()));
  EXPECT_NE(held[0].buffer.what.find("the 6 items given"), std::string::npos) << held[0].buffer.what;
  // A oneDNN convolution whose primitive wants another layout than crema's keeps the weights reordered once.
  const Layer& conv = *net.layer_by_name("conv");
  for (size_t i = 1; i < held.size(); ++i) {
    EXPECT_EQ(net.layer_names()[held[i].layer], "conv");
    EXPECT_EQ(conv.engine(), "onednn");
    EXPECT_GE(held[i].buffer.bytes, sizeof(float) * 16 * 3 * 3 * 3);
    EXPECT_LE(held[i].buffer.bytes, held[i - 1].buffer.bytes);
  }
}

}  // namespace
}  // namespace crema
