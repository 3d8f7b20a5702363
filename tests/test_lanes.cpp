// Execution lanes (net/lanes.hpp) and the memory plan made for them (MemoryPlanOptions::concurrent):
//   - the runner runs the steps of a wide stretch at once (two steps that each wait to see the other start both
//     finish), never a step before what it waits for, stops on a step that declines or throws and says what is left,
//     and in the automatic mode times both ways and settles;
//   - the plan made for lanes shares bytes only between buffers whose uses the net's own dependencies order, so its
//     step graph keeps every branch of GoogLeNet independent (the plan made for running in order does not);
//   - every backward step, like every forward step, writes only what its step graph says; steps that run alone (their
//     results change with the thread count) are ordered after the ready steps that run on lanes;
//   - a net gives the in-order results on lanes, forward only and training (losses, gradients, updated parameters),
//     a solver's snapshots (weights and state) are the in-order ones byte for byte, and nets running at once on
//     several threads (on lanes or not) each give what each gives alone;
//   - the context's ones() serves several lanes at once.
// That lanes give every example net's in-order results bit for bit is ExamplesTest.LanesGiveTheInOrderResultsBitForBit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "net/lanes.hpp"
#include "net/lifetimes.hpp"
#include "net/memory_plan.hpp"
#include "net/net.hpp"
#include "net/step_graph.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using Clock = std::chrono::steady_clock;

// 0 -> {1, 2, 3, 4} -> 5 -> 6, and 3 -> 4 inside the stretch.
StepGraph Diamond() {
  StepGraph graph;
  graph.waits_for = {{}, {0}, {0}, {0}, {0, 3}, {1, 2, 3, 4}, {5}};
  graph.depth = {0, 1, 1, 1, 2, 3, 4};
  return graph;
}

TEST(StepLanesTest, StepsOfAWideStretchRunAtOnceNeverBeforeWhatTheyWaitFor) {
  const StepGraph graph = Diamond();
  StepLanes lanes;
  lanes.Configure(2, /*automatic=*/false);
  lanes.Prepare(graph);
  std::atomic<int> started{0}, running{0}, most_at_once{0}, clock{0};
  std::vector<int> began(graph.size(), -1), ended(graph.size(), -1);
  std::mutex mutex;
  const std::vector<int> left = lanes.Run([&](int step) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      began[step] = clock++;
    }
    const int now = ++running;
    int most = most_at_once.load();
    while (now > most && !most_at_once.compare_exchange_weak(most, now)) {
    }
    // The stretch's first steps wait (up to 10 s) to see another step of it start: on one lane they never would.
    if (step >= 1 && step <= 3 && ++started <= 2) {
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (started.load() < 2 && Clock::now() < deadline) std::this_thread::yield();
    }
    --running;
    std::lock_guard<std::mutex> lock(mutex);
    ended[step] = clock++;
    return true;
  });
  EXPECT_TRUE(left.empty());
  EXPECT_EQ(most_at_once.load(), 2);
  for (size_t s = 0; s < graph.size(); ++s) {
    ASSERT_GE(began[s], 0) << "step " << s << " never ran";
    for (int before : graph.waits_for[s])
      EXPECT_LT(ended[before], began[s]) << "step " << s << " began before step " << before << " ended";
  }
}

TEST(StepLanesTest, OneLaneRunsTheStepsInOrderOnTheCallingThread) {
  const StepGraph graph = Diamond();
  StepLanes lanes;
  lanes.Configure(1, false);
  lanes.Prepare(graph);
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  lanes.Run([&](int step) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(step);
    return true;
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(StepLanesTest, ADecliningStepStopsTheLanesAndWhatIsLeftIsReturned) {
  const StepGraph graph = Diamond();
  StepLanes lanes;
  lanes.Configure(3, false);
  lanes.Prepare(graph);
  std::vector<std::atomic<bool>> ran(graph.size());
  const std::vector<int> left = lanes.Run([&](int step) {
    if (step == 3) return false;  // as a step whose bottoms changed shape mid-pass
    ran[step] = true;
    return true;
  });
  // Step 3, and all that waits for it, is left; what ran never waited for anything left.
  for (int must : {3, 4, 5, 6}) EXPECT_NE(std::find(left.begin(), left.end(), must), left.end()) << must;
  EXPECT_TRUE(std::is_sorted(left.begin(), left.end()));
  for (size_t s = 0; s < graph.size(); ++s) {
    const bool is_left = std::find(left.begin(), left.end(), static_cast<int>(s)) != left.end();
    EXPECT_NE(ran[s].load(), is_left) << "step " << s;
    if (is_left) continue;
    for (int before : graph.waits_for[s]) EXPECT_TRUE(ran[before].load()) << "step " << s << " ran, but not " << before;
  }
}

TEST(StepLanesTest, AnExceptionInALaneStopsTheLanesAndIsRethrown) {
  const StepGraph graph = Diamond();
  StepLanes lanes;
  lanes.Configure(2, false);
  lanes.Prepare(graph);
  std::atomic<bool> after_ran{false};
  try {
    lanes.Run([&](int step) {
      if (step == 2) throw std::runtime_error("step 2 failed");
      if (step >= 5) after_ran = true;
      return true;
    });
    ADD_FAILURE() << "no exception came out of the lanes";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "step 2 failed");
  }
  EXPECT_FALSE(after_ran.load()) << "steps waiting for the failed one ran";
}

TEST(StepLanesTest, TheAutomaticModeTimesEachWideStretchBothWaysThenSettles) {
  const StepGraph graph = Diamond();
  StepLanes lanes;
  lanes.Configure(2, /*automatic=*/true);
  lanes.Prepare(graph);
  int passes = 0;
  while (!lanes.settled() && passes < 100) {
    lanes.Run([](int) { return true; });
    ++passes;
  }
  EXPECT_TRUE(lanes.settled());
  // An untimed pass each way, then three timed each way.
  EXPECT_EQ(passes, 8);
  EXPECT_NE(lanes.Describe().find("1 wide stretches"), std::string::npos) << lanes.Describe();
}

// GoogLeNet's deploy net at batch 1 with memory plans made for `lanes`.
std::unique_ptr<Net> GoogLeNet(int lanes, bool plan_memory = true) {
  NetParameter param;
  ReadProtoFromTextFile(test::SourceDir() + "/examples/imagenet/googlenet_deploy.prototxt", &param);
  for (LayerParameter& layer : *param.mutable_layer())
    if (layer.type() == "Input")
      for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, 1);
  auto context = std::make_shared<Context>(Device::kCPU, 0, 7);
  context->set_lanes(lanes);
  context->set_plan_memory(plan_memory);
  auto net = std::make_unique<Net>(param, context);
  net->PlanMemory(false);
  net->Forward();
  return net;
}

// `net`'s forward step graph from its memory alone (as it is bound), leaving aside the steps that run alone for their
// thread count (a Winograd convolution, where timing chose it).
StepGraph DataGraph(const Net& net) {
  std::vector<StepAccess> access = ForwardStepAccess(net);
  for (StepAccess& step : access) step.alone = false;
  return StepGraphOf(access);
}

// The edges of `net`'s step graph (as its memory is bound) that its own dependencies do not imply.
int EdgesBeyondTheNetsOwn(const Net& net, const PassOrder& own) {
  const StepGraph graph = DataGraph(net);
  int beyond = 0;
  for (size_t s = 0; s < graph.size(); ++s)
    for (int before : graph.waits_for[s]) beyond += own.Before(before, static_cast<int>(s)) ? 0 : 1;
  return beyond;
}

TEST(LanesMemoryPlanTest, ThePlanForLanesSharesBytesOnlyBetweenUsesTheNetOrders) {
  // The net's own order: from the lifetimes of the net with every blob in memory of its own.
  const std::unique_ptr<Net> unplanned = GoogLeNet(1, /*plan_memory=*/false);
  const NetLifetimes lifetimes = ComputeLifetimes(*unplanned, false);
  const PassOrder own = ComputePassOrder(*unplanned, PlainSchedule(*unplanned, false), lifetimes);
  const std::unique_ptr<Net> for_lanes = GoogLeNet(2);
  const std::unique_ptr<Net> in_order = GoogLeNet(1);
  ASSERT_NE(for_lanes->memory_plan(), nullptr);
  ASSERT_NE(in_order->memory_plan(), nullptr);
  EXPECT_TRUE(for_lanes->memory_plan()->concurrent);
  EXPECT_FALSE(in_order->memory_plan()->concurrent);
  ASSERT_EQ(for_lanes->plan().size(), unplanned->plan().size());
  EXPECT_EQ(EdgesBeyondTheNetsOwn(*for_lanes, own), 0) << DataGraph(*for_lanes).Describe(*for_lanes);
  // The plan for running in order reuses bytes between the towers of an inception module (and so orders them): the
  // check above can fail.
  EXPECT_GT(EdgesBeyondTheNetsOwn(*in_order, own), 0);
  EXPECT_GT(DataGraph(*for_lanes).Width(), DataGraph(*in_order).Width());
  // Still a plan: far below every buffer with memory of its own.
  const MemoryPlan& plan = *for_lanes->memory_plan();
  EXPECT_LT(plan.planned_bytes(), plan.unplanned_bytes / 2);
  std::printf("[ lanes    ] GoogLeNet b1 arena: %zu bytes for lanes, %zu in order, %zu unplanned\n",
              plan.planned_bytes(), in_order->memory_plan()->planned_bytes(), plan.unplanned_bytes);
}

// Every byte of the arena a step changes lies in what ForwardStepAccess (`backward`: BackwardStepAccess) says it
// writes: the step graph's ground, for each step of `net`'s pass run in order (the arena compared before and after
// each step; backward after a forward). Returns how many steps run alone.
int ExpectStepsWriteOnlyWhatTheySay(Net* net, bool backward = false) {
  net->ClearParamDiffs();
  net->Forward();  // binds the memory and reshapes every step
  EXPECT_NE(net->memory_plan(), nullptr);
  if (net->memory_plan() == nullptr) return 0;
  const std::vector<StepAccess> access = backward ? BackwardStepAccess(*net) : ForwardStepAccess(*net);
  std::vector<int> steps = BackwardSteps(*net);
  if (!backward) {
    steps.resize(net->plan().size());
    for (size_t s = 0; s < steps.size(); ++s) steps[s] = static_cast<int>(s);
  }
  EXPECT_EQ(access.size(), steps.size());
  const PlannedBuffer& any = net->memory_plan()->buffers.front();
  const Blob& owner = *net->blobs()[any.owner];
  const auto arena = any.gradient ? owner.diff() : owner.data();
  const size_t floats = arena->size() / sizeof(float);
  int alone = 0;
  std::vector<float> before(floats);  // one buffer for every step: fresh pages are slow to fault in
  for (size_t i = 0; i < steps.size() && i < access.size(); ++i) {
    const float* values = static_cast<const float*>(arena->cpu_data());
    // The floats the step declares it writes, as sorted ranges; the others are compared a gap at a time.
    std::vector<std::pair<size_t, size_t>> declared;
    for (const StepRange& range : access[i].writes)
      if (range.storage == arena.get()) declared.emplace_back(range.begin, std::min(range.end, floats));
    std::sort(declared.begin(), declared.end());
    std::memcpy(before.data(), values, floats * sizeof(float));
    if (backward) {
      net->BackwardStep(steps[i]);
    } else {
      net->ForwardStep(steps[i]);
    }
    const float* after = static_cast<const float*>(arena->cpu_data());
    size_t stray = 0, first = 0, from = 0;
    auto compare_gap = [&](size_t end) {
      if (end > from && std::memcmp(after + from, before.data() + from, (end - from) * sizeof(float)) != 0)
        for (size_t k = from; k < end; ++k)
          if (std::memcmp(&after[k], &before[k], sizeof(float)) != 0 && stray++ == 0) first = k;
    };
    for (const auto& [begin, end] : declared) {
      compare_gap(begin);
      from = std::max(from, end);
    }
    compare_gap(floats);
    EXPECT_EQ(stray, 0u) << (backward ? "the backward of " : "the forward of ") << "step " << steps[i] << " ("
                         << net->layer_names()[net->plan()[steps[i]].layer] << ") changed " << stray
                         << " floats of the arena outside what it declares, the first at " << first;
    alone += access[i].alone;
  }
  return alone;
}

TEST(LanesMemoryPlanTest, EveryStepWritesOnlyWhatTheStepGraphSays) {
  for (int lanes : {1, 2}) {
    SCOPED_TRACE(lanes);
    const std::unique_ptr<Net> googlenet = GoogLeNet(lanes);
    ExpectStepsWriteOnlyWhatTheySay(googlenet.get());
  }
}

// A CPU context for `lanes`, seeded; with `streams` its nets' lanes are rehearsed streams (as on a GPU).
std::shared_ptr<Context> LanesContext(int lanes, uint64_t seed, bool streams) {
  auto context = std::make_shared<Context>(Device::kCPU, 0, seed);
  context->set_lanes(lanes);
  context->set_streams_on_host(streams);
  return context;
}

// GoogLeNet's deploy net at batch 1 as a training net (a label and a softmax loss for its probabilities), planned for
// backward with memory plans made for `lanes`.
std::unique_ptr<Net> TrainingGoogLeNet(int lanes, bool streams = false) {
  NetParameter param;
  ReadProtoFromTextFile(test::SourceDir() + "/examples/imagenet/googlenet_deploy.prototxt", &param);
  for (LayerParameter& layer : *param.mutable_layer()) {
    if (layer.type() == "Input") {
      for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, 1);
      layer.add_top("label");
      layer.mutable_input_param()->add_shape()->add_dim(1);
    }
    if (layer.type() == "Softmax") {
      layer.set_type("SoftmaxWithLoss");
      layer.add_bottom("label");
    }
  }
  auto net = std::make_unique<Net>(param, LanesContext(lanes, 7, streams));
  net->input_blobs()[1]->mutable_cpu_data()[0] = 3;
  test::FillGaussian(net->input_blobs()[0], 0.f, 1.f, 5);
  return net;
}

TEST(LanesMemoryPlanTest, EveryBackwardStepWritesOnlyWhatTheStepGraphSays) {
  for (int lanes : {1, 2}) {
    SCOPED_TRACE(lanes);
    const std::unique_ptr<Net> googlenet = TrainingGoogLeNet(lanes);
    EXPECT_GT(ExpectStepsWriteOnlyWhatTheySay(googlenet.get(), /*backward=*/true), 0);  // the convolutions
  }
}

// A small training net with two towers, its own data (Input blobs) and a loss.
const char kTowersTraining[] = R"(
  name: 'towers'
  force_backward: true
  layer { name: 'data' type: 'Input' top: 'data' top: 'label'
          input_param { shape { dim: 4 dim: 3 dim: 10 dim: 10 } shape { dim: 4 } } }
  layer { name: 'a' type: 'Convolution' bottom: 'data' top: 'a'
          convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
  layer { name: 'relu_a' type: 'ReLU' bottom: 'a' top: 'a' }
  layer { name: 'b' type: 'Convolution' bottom: 'data' top: 'b'
          convolution_param { num_output: 5 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
  layer { name: 'pool_b' type: 'Pooling' bottom: 'b' top: 'pool_b'
          pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
  layer { name: 'join' type: 'Concat' bottom: 'a' bottom: 'pool_b' top: 'joined' }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'joined' top: 'ip'
          inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.05 } } }
  layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
)";

// The towers net's data (Gaussian) and labels (0 to 2), drawn from `seed`.
void FeedTowers(Net* net, uint64_t seed) {
  test::FillGaussian(net->input_blobs()[0], 0.f, 1.f, seed);
  float* labels = net->input_blobs()[1]->mutable_cpu_data();
  for (int k = 0; k < 4; ++k) labels[k] = static_cast<float>((seed + k) % 3);
}

// `iterations` of forward, backward and an SGD step on `lanes`; the losses and the final parameters.
std::vector<float> Train(int lanes, uint64_t seed, int iterations, bool streams = false) {
  Net net(test::ParseNet(kTowersTraining), LanesContext(lanes, seed, streams));
  if (lanes > 0) {
    EXPECT_EQ(net.lanes(), lanes);
    EXPECT_EQ(net.lanes_on_streams(), streams && lanes > 1);
  }
  std::vector<float> results;
  for (int i = 0; i < iterations; ++i) {
    FeedTowers(&net, seed + i);
    net.ClearParamDiffs();
    results.push_back(net.Forward());
    net.Backward();
    for (Blob* param : net.learnable_params()) {
      float* data = param->mutable_cpu_data();
      const float* diff = param->cpu_diff();
      for (int k = 0; k < param->count(); ++k) data[k] -= 0.1f * diff[k];
    }
  }
  for (Blob* param : net.learnable_params()) {
    const std::vector<float> values = test::DataOf(*param);
    results.insert(results.end(), values.begin(), values.end());
  }
  return results;
}

// `passes` forward passes of the towers net run forward only (as a test net or crema test runs it) on `lanes`:
// each pass's loss and joined features.
std::vector<float> Infer(int lanes, uint64_t seed, int passes, bool streams = false) {
  Net net(test::ParseNet(kTowersTraining), LanesContext(lanes, seed, streams));
  net.KeepBlobs({"joined"});
  net.PlanMemory(false);
  if (lanes > 0) {
    EXPECT_EQ(net.lanes(), lanes);
  }
  std::vector<float> results;
  for (int i = 0; i < passes; ++i) {
    FeedTowers(&net, seed + i);
    results.push_back(net.Forward());
    const std::vector<float> joined = test::DataOf(*net.blob_by_name("joined"));
    results.insert(results.end(), joined.begin(), joined.end());
  }
  return results;
}

// The graph a net's streams keep: its step graph with no step alone (as Net makes it for streams).
StepGraph StreamsGraphOf(const Net& net, bool backward) {
  std::vector<StepAccess> access = backward ? BackwardStepAccess(net) : ForwardStepAccess(net);
  for (StepAccess& step : access) step.alone = false;
  return StepGraphOf(access);
}

void ExpectSameBits(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  if (differ > 0)
    ADD_FAILURE() << differ << " of " << actual.size() << " values differ, the first at " << first << ": "
                  << actual[first] << " against " << expected[first];
}

TEST(LanesTest, ANetRunForwardOnlyOnLanesGivesTheInOrderResultsBitForBit) {
  for (int lanes : {2, 3, 0}) {  // 0: automatic, each stretch timed both ways, its steps made for each
    SCOPED_TRACE(lanes);
    ExpectSameBits(Infer(lanes, 11, 12), Infer(1, 11, 12));
  }
}

TEST(LanesTest, TrainingOnLanesGivesTheInOrderResultsBitForBit) {
  const std::vector<float> in_order = Train(1, 11, 12);
  for (int lanes : {2, 3, 0}) {
    SCOPED_TRACE(lanes);
    ExpectSameBits(Train(lanes, 11, 12), in_order);
  }
}

// The towers net's backward: the loss, the inner product and the concatenation, then each tower's own steps. Its
// convolutions' weight gradients change with the thread count and run alone; the ReLU's and the pooling's backward
// are ready together and run on the lanes, so the arranged order puts them before either convolution, which in the
// plan's reverse order lies between them.
TEST(LanesTest, BackwardRunsOnLanesWithTheConvolutionsAlone) {
  auto context = std::make_shared<Context>(Device::kCPU, 0, 3);
  context->set_lanes(2);
  NetParameter param = test::ParseNet(kTowersTraining);
  param.set_fold(false);  // relu_a a step of its own (trained fused, convolution a would run it: net/fuse.hpp)
  Net net(param, context);
  net.Forward();
  net.Backward();
  ASSERT_EQ(net.lanes(), 2);
  const StepLanes& lanes = net.backward_lanes();
  ASSERT_TRUE(lanes.prepared());
  const std::vector<StepLanes::WideStretch> wide = lanes.wide_stretches();
  ASSERT_EQ(wide.size(), 1u) << const_cast<StepLanes&>(lanes).Describe();
  std::vector<std::string> names;
  for (int i = wide[0].begin; i < wide[0].end; ++i)
    names.push_back(net.layer_names()[net.plan()[net.backward_lane_step(i)].layer]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"pool_b", "relu_a"}));
  // Every step of backward is in the order once.
  const std::vector<int> steps = BackwardSteps(net);
  std::vector<int> arranged;
  for (size_t i = 0; i < steps.size(); ++i) arranged.push_back(net.backward_lane_step(static_cast<int>(i)));
  std::sort(arranged.begin(), arranged.end());
  std::vector<int> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(arranged, sorted);
}

// A chain with a label beside it (read by the accuracy and the loss at the end, through a Split that only hands
// the label out): the chain runs in order on all the threads, and only the accuracy and the loss, which are
// independent and both compute, form a wide stretch (the net's outputs, read once the pass has ended, do not order
// the accuracy, an output, before the loss, the last step, in the plan made for lanes).
TEST(LanesTest, AStepThatComputesNothingDoesNotMakeAChainWide) {
  auto context = std::make_shared<Context>(Device::kCPU, 0, 3);
  context->set_lanes(2);
  Net net(test::ParseNet(R"(
    name: 'chain'
    state { phase: TEST }
    layer { name: 'data' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 4 dim: 3 dim: 10 dim: 10 } shape { dim: 4 } } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip'
            inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
    layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'accuracy' }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )"),
          context);
  net.PlanMemory(false);
  net.input_blobs()[1]->set_data(1.f);
  net.Forward();
  ASSERT_EQ(net.lanes(), 2);
  const std::vector<StepLanes::WideStretch> wide = net.step_lanes().wide_stretches();
  ASSERT_EQ(wide.size(), 1u) << net.step_lanes().Describe();
  std::vector<std::string> names;
  for (int i = wide[0].begin; i < wide[0].end; ++i)
    names.push_back(net.layer_names()[net.plan()[net.forward_lane_step(i)].layer]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"accuracy", "loss"}));
}

// A solver trains a net with towers of every kind (a convolution with ReLU and Dropout, BatchNorm and Scale in
// training, pooling) from an LMDB, on `lanes`; its last snapshot's two files.
std::pair<std::string, std::string> SolveOnLanes(int lanes, const std::string& source, const std::string& prefix) {
  SolverParameter param;
  ReadProtoFromText(
      "base_lr: 0.02 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.0005 display: 0 max_iter: 12 "
      "snapshot: 12 random_seed: 9 solver_mode: CPU type: 'Adam'",
      "solver", &param);
  ReadProtoFromText(R"(
    name: 'towers'
    layer { name: 'data' type: 'Data' top: 'data' top: 'label'
            data_param { source: ')" +
                        source + R"(' batch_size: 8 backend: LMDB }
            transform_param { scale: 0.00390625 mirror: true } }
    layer { name: 'a' type: 'Convolution' bottom: 'data' top: 'a'
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'relu_a' type: 'ReLU' bottom: 'a' top: 'a' }
    layer { name: 'drop_a' type: 'Dropout' bottom: 'a' top: 'a' dropout_param { dropout_ratio: 0.3 } }
    layer { name: 'b' type: 'Convolution' bottom: 'data' top: 'b'
            convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: 'xavier' } } }
    layer { name: 'bn_b' type: 'BatchNorm' bottom: 'b' top: 'b' }
    layer { name: 'scale_b' type: 'Scale' bottom: 'b' top: 'b' scale_param { bias_term: true } }
    layer { name: 'relu_b' type: 'ReLU' bottom: 'b' top: 'b' }
    layer { name: 'pool_c' type: 'Pooling' bottom: 'data' top: 'pool_c'
            pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
    layer { name: 'join' type: 'Concat' bottom: 'a' bottom: 'b' bottom: 'pool_c' top: 'joined' }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'joined' top: 'ip'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
  )",
                    "net", param.mutable_net_param());
  param.mutable_net_param()->set_lanes(lanes);
  param.set_snapshot_prefix(prefix);
  auto solver = CreateSolver(param);
  EXPECT_EQ(solver->net()->lanes(), lanes);
  solver->Solve();
  if (lanes > 1) {
    EXPECT_FALSE(solver->net()->backward_lanes().wide_stretches().empty());
  }
  // The state names its weights file and records the solver and the net as given (the prefix, the lanes): the rest,
  // the solver's history, the loss window and every layer's runtime state (data cursors, random streams), must match.
  SolverState state;
  ReadSolverStateFile(prefix + "_iter_12.solverstate", &state);
  EXPECT_EQ(state.train_net().lanes(), lanes);
  state.clear_learned_net();
  state.clear_solver();
  state.clear_train_net();
  std::string kept;
  state.SerializeToString(&kept);
  return {test::FileBytes(prefix + "_iter_12.caffemodel"), kept};
}

TEST(LanesTest, ASolverOnLanesWritesTheInOrderSnapshotsByteForByte) {
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 40, 8, 8, 4, 17);
  const auto in_order = SolveOnLanes(1, source, dir.file("in_order"));
  ASSERT_FALSE(in_order.first.empty());
  ASSERT_FALSE(in_order.second.empty());
  for (int lanes : {2, 3}) {
    SCOPED_TRACE(lanes);
    const auto on_lanes = SolveOnLanes(lanes, source, dir.file("lanes" + std::to_string(lanes)));
    EXPECT_TRUE(on_lanes.first == in_order.first) << "the weights differ";
    EXPECT_TRUE(on_lanes.second == in_order.second) << "the solver states differ";
  }
}

TEST(LanesTest, TwoNetsOnOneDeviceAtOnceGiveEachItsSoloResult) {
  const std::vector<float> training_alone = Train(2, 21, 6), inference_alone = Infer(2, 22, 8),
                           other_inference_alone = Infer(3, 23, 8), streams_alone = Train(3, 24, 6, true);
  std::vector<float> training, inference, other_inference, on_streams;
  std::thread one([&] { training = Train(2, 21, 6); });
  std::thread two([&] { inference = Infer(2, 22, 8); });
  std::thread three([&] { other_inference = Infer(3, 23, 8); });
  std::thread four([&] { on_streams = Train(3, 24, 6, true); });
  one.join();
  two.join();
  three.join();
  four.join();
  ExpectSameBits(training, training_alone);
  ExpectSameBits(inference, inference_alone);
  ExpectSameBits(other_inference, other_inference_alone);
  ExpectSameBits(on_streams, streams_alone);
}

// Training GoogLeNet on lanes: the plan made for them keeps the towers' backward steps apart too, and a pass on
// lanes gives the in-order loss and gradients bit for bit; on rehearsed streams as well.
TEST(LanesTest, GoogLeNetTrainsOnLanesAsInOrder) {
  const auto run = [](int lanes, bool streams) {
    const std::unique_ptr<Net> net = TrainingGoogLeNet(lanes, streams);
    std::vector<float> results;
    for (int pass = 0; pass < 2; ++pass) {
      net->ClearParamDiffs();
      results.push_back(net->Forward());
      net->Backward();
      for (Blob* param : net->learnable_params()) {
        const std::vector<float> gradient = test::DiffOf(*param);
        results.insert(results.end(), gradient.begin(), gradient.end());
      }
    }
    if (lanes > 1 && streams) {
      EXPECT_TRUE(net->memory_plan()->concurrent);
      EXPECT_EQ(net->forward_streams().streams, lanes);
      EXPECT_EQ(net->backward_streams().streams, lanes);
      std::printf("[ streams  ] GoogLeNet b1 training: forward on %s; backward on %s\n",
                  net->forward_streams().Describe().c_str(), net->backward_streams().Describe().c_str());
    } else if (lanes > 1) {
      EXPECT_TRUE(net->memory_plan()->concurrent);
      EXPECT_FALSE(net->backward_lanes().wide_stretches().empty());
      std::printf("[ lanes    ] GoogLeNet b1 training: forward %s; backward %s\n", net->step_lanes().Describe().c_str(),
                  net->backward_lanes().Describe().c_str());
    }
    return results;
  };
  const std::vector<float> in_order = run(1, false);
  ExpectSameBits(run(2, false), in_order);
  ExpectSameBits(run(3, true), in_order);
}

// Lanes as a GPU's streams, rehearsed on the host (net/streams.hpp): each pass's steps are queued on the streams of
// the schedule and run in a random interleaving that keeps only each stream's order and the events, so a missing
// event would let a step read a value not yet written, or overwritten (the inputs change every pass, and the plan for
// lanes shares bytes between buffers). Forward only and training, on 2 to 4 streams, give the in-order bits.
TEST(LanesTest, RehearsedStreamsGiveTheInOrderResultsBitForBit) {
  const std::vector<float> inferred = Infer(1, 31, 8), trained = Train(1, 31, 8);
  for (int streams : {2, 3, 4}) {
    SCOPED_TRACE(streams);
    ExpectSameBits(Infer(streams, 31, 8, /*streams=*/true), inferred);
    ExpectSameBits(Train(streams, 31, 8, /*streams=*/true), trained);
  }
  // The rehearsal does interleave: the towers run out of their queueing order.
  Net net(test::ParseNet(kTowersTraining), LanesContext(2, 5, true));
  FeedTowers(&net, 5);
  net.Forward();
  net.Backward();
  EXPECT_EQ(net.forward_streams().streams, 2);
  EXPECT_TRUE(net.forward_streams().Keeps(StreamsGraphOf(net, /*backward=*/false)));
  EXPECT_TRUE(net.backward_streams().Keeps(StreamsGraphOf(net, /*backward=*/true)));
  const auto* rehearsal = dynamic_cast<const RehearsedStreams*>(net.stream_device());
  ASSERT_NE(rehearsal, nullptr);
  EXPECT_GT(rehearsal->reordered(), 0);
  // Without the rehearsal (automatic lanes), a context that asks for none runs in order, as on a GPU.
  Net automatic(test::ParseNet(kTowersTraining), LanesContext(0, 5, true));
  EXPECT_EQ(automatic.lanes(), 1);
  EXPECT_FALSE(automatic.lanes_on_streams());
}

// The towers net trained with each parameter's SGD step queued by its gradient hook (Net::GradientReady::Then, as a
// data-parallel reducer queues a parameter's all-reduce): the losses and the final parameters. Checks that every
// hook's work ran once per pass, and on streams that each hook fired while its step was queued, before any of the
// pass's work had run.
std::vector<float> TrainFromHooks(int lanes, uint64_t seed, int iterations, bool streams) {
  Net net(test::ParseNet(kTowersTraining), LanesContext(lanes, seed, streams));
  const auto* rehearsal = dynamic_cast<const RehearsedStreams*>(net.stream_device());
  EXPECT_EQ(rehearsal != nullptr, streams && lanes > 1);
  std::vector<int> runs(net.learnable_params().size(), 0);
  int64_t ran_before = 0;
  int hooks = 0;
  net.set_gradient_ready_callback([&](const Net::GradientReady& ready) {
    ++hooks;
    if (rehearsal != nullptr) {
      EXPECT_EQ(rehearsal->operations_run(), ran_before) << "hook of " << ready.index();
    }
    Blob* param = net.learnable_params()[ready.index()];
    ready.Then([&runs, param, index = ready.index()] {
      ++runs[index];
      float* data = param->mutable_cpu_data();
      const float* diff = param->cpu_diff();
      for (int k = 0; k < param->count(); ++k) data[k] -= 0.1f * diff[k];
    });
  });
  std::vector<float> results;
  for (int i = 0; i < iterations; ++i) {
    FeedTowers(&net, seed + i);
    net.ClearParamDiffs();
    results.push_back(net.Forward());
    if (rehearsal != nullptr) ran_before = rehearsal->operations_run();
    net.Backward();
    for (size_t p = 0; p < runs.size(); ++p) EXPECT_EQ(runs[p], i + 1) << "parameter " << p;
  }
  EXPECT_EQ(hooks, iterations * static_cast<int>(runs.size()));
  for (Blob* param : net.learnable_params()) {
    const std::vector<float> values = test::DataOf(*param);
    results.insert(results.end(), values.begin(), values.end());
  }
  return results;
}

// What a gradient hook queues sees the complete gradient, and is done when Backward returns: in order and on CPU lanes
// it runs at once; on (rehearsed) streams the hook fires as its step is queued and the work runs on the pass's side
// stream after the step's event, interleaved at random with the rest of backward. An update made there before the
// gradient is complete, or before a step still to run has read the parameter, would change the bits.
TEST(LanesTest, GradientHooksQueueWorkThatSeesTheCompleteGradient) {
  const std::vector<float> trained = Train(1, 41, 6);
  ExpectSameBits(TrainFromHooks(1, 41, 6, /*streams=*/false), trained);
  ExpectSameBits(TrainFromHooks(2, 41, 6, /*streams=*/false), trained);
  for (int streams : {2, 3}) {
    SCOPED_TRACE(streams);
    ExpectSameBits(TrainFromHooks(streams, 41, 6, /*streams=*/true), trained);
  }
  // Backward's schedule records an event after each step that completes a parameter, waited for or not.
  Net net(test::ParseNet(kTowersTraining), LanesContext(2, 41, true));
  net.set_gradient_ready_callback([](int) {});
  FeedTowers(&net, 41);
  net.Forward();
  net.Backward();
  const StreamSchedule& schedule = net.backward_streams();
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    const int step = net.gradient_ready_step(static_cast<int>(p));
    const auto it = std::find_if(schedule.steps.begin(), schedule.steps.end(),
                                 [&](const StreamStep& queued) { return net.backward_lane_step(queued.step) == step; });
    ASSERT_NE(it, schedule.steps.end()) << p;
    EXPECT_GE(it->event, 1) << p;
  }
}

TEST(ContextTest, OnesServesSeveralThreadsAtOnceAndKeepsWhatItHandedOut) {
  Context context;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int count = 1 + t; count < 4000; count += 97) {
        const float* ones = context.ones(count);
        for (int i = 0; i < count; ++i) wrong += ones[i] != 1.f;
      }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace crema
