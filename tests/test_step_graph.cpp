// The step graph (net/step_graph.hpp): independent branches are independent, every hazard is an edge, and running
// the steps of the example nets in random orders that keep the edges gives the sequential outputs bit for bit,
// with every value not an input poisoned before each such run (a step run before what it reads is written then
// reads NaN; one that overwrites memory a later-ordered step still had to read leaves a wrong value).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "net/step_graph.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Two towers from one input, joined: a and b are independent; relu_a runs in place on a's top.
const char kTowers[] = R"(
  name: 'towers'
  layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
  layer { name: 'a' type: 'Convolution' bottom: 'data' top: 'a'
          convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
  layer { name: 'relu_a' type: 'ReLU' bottom: 'a' top: 'a' }
  layer { name: 'b' type: 'Convolution' bottom: 'data' top: 'b'
          convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.1 } } }
  layer { name: 'pool_b' type: 'Pooling' bottom: 'b' top: 'pool_b'
          pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
  layer { name: 'join' type: 'Concat' bottom: 'a' bottom: 'pool_b' top: 'out' }
)";

int StepOf(const Net& net, const std::string& layer) {
  for (size_t s = 0; s < net.plan().size(); ++s)
    if (net.layer_names()[net.plan()[s].layer] == layer) return static_cast<int>(s);
  ADD_FAILURE() << "no step runs " << layer;
  return -1;
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

bool Waits(const StepGraph& graph, int step, int before) {
  const auto& list = graph.waits_for[step];
  return std::find(list.begin(), list.end(), before) != list.end();
}

TEST(StepGraphTest, TowersAreIndependentAndHazardsAreEdges) {
  NetParameter param = test::ParseNet(kTowers);
  auto context = std::make_shared<Context>();
  context->set_plan_memory(false);  // every blob its own memory: only the net's own edges remain
  Net net(param, context);
  net.Forward();
  const StepGraph graph = ForwardStepGraph(net);
  const int a = StepOf(net, "a"), relu = StepOf(net, "relu_a"), b = StepOf(net, "b"), pool = StepOf(net, "pool_b"),
            join = StepOf(net, "join");
  EXPECT_TRUE(Waits(graph, relu, a));
  EXPECT_TRUE(Waits(graph, pool, b));
  EXPECT_TRUE(Waits(graph, join, relu));
  EXPECT_TRUE(Waits(graph, join, pool));
  // The towers share only their (read) input and the net's scratch: conv a and conv b both use the shared
  // workspace, so they wait for each other, but ReLU and pooling take none.
  EXPECT_FALSE(Waits(graph, pool, relu));
  EXPECT_FALSE(Waits(graph, relu, b));
  EXPECT_GE(graph.Width(), 2) << graph.Describe(net);
  for (size_t s = 0; s < graph.size(); ++s)
    for (int before : graph.waits_for[s]) EXPECT_LT(before, static_cast<int>(s));
  std::vector<int> sequential(graph.size());
  for (size_t s = 0; s < sequential.size(); ++s) sequential[s] = static_cast<int>(s);
  EXPECT_TRUE(graph.Allows(sequential));
  std::swap(sequential[relu], sequential[a]);
  EXPECT_FALSE(graph.Allows(sequential));
}

// A random order of the steps that keeps every edge: at each point, one of the steps whose waits are over.
std::vector<int> RandomOrder(const StepGraph& graph, std::mt19937* random) {
  std::vector<int> order;
  std::vector<bool> done(graph.size(), false);
  while (order.size() < graph.size()) {
    std::vector<int> ready;
    for (size_t s = 0; s < graph.size(); ++s) {
      if (done[s]) continue;
      bool free = true;
      for (int before : graph.waits_for[s]) free = free && done[before];
      if (free) ready.push_back(static_cast<int>(s));
    }
    const int pick = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(*random)];
    done[pick] = true;
    order.push_back(pick);
  }
  return order;
}

struct ExampleNet {
  const char* prototxt;  // under examples/
  bool plan_memory;
};

void PrintTo(const ExampleNet& net, std::ostream* out) {
  *out << net.prototxt << (net.plan_memory ? " (memory planned)" : " (unplanned)");
}

class StepGraphExamplesTest : public ::testing::TestWithParam<ExampleNet> {};

TEST_P(StepGraphExamplesTest, RandomOrdersKeepingTheEdgesGiveTheSequentialOutputsBitForBit) {
  NetParameter param;
  ReadProtoFromTextFile(test::SourceDir() + "/examples/" + GetParam().prototxt, &param);
  param.mutable_state()->set_phase(TEST);
  for (LayerParameter& layer : *param.mutable_layer())  // batch 1, as inference runs them
    if (layer.type() == "Input")
      for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, 1);
  auto context = std::make_shared<Context>(Device::kCPU, 0, 5);
  context->set_plan_memory(GetParam().plan_memory);
  Net net(param, context);
  net.RunAfterWeightsPasses();
  std::vector<Blob*> outputs;
  for (int id : net.output_blob_indices()) outputs.push_back(net.blobs()[id].get());
  net.Forward();  // binds the memory the graph is read from
  const StepGraph graph = ForwardStepGraph(net);
  SCOPED_TRACE(graph.Describe(net));
  std::mt19937 random(17);
  for (int trial = 0; trial < 3; ++trial) {
    for (Blob* input : net.input_blobs()) test::FillGaussian(input, 0.f, 1.f, 100 + trial);
    net.Forward();
    std::vector<std::vector<float>> expected;
    for (Blob* output : outputs) expected.push_back(test::DataOf(*output));
    // Poison every value, then write the inputs again.
    for (const auto& blob : net.blobs())
      if (blob->count() > 0) blob->set_data(std::numeric_limits<float>::quiet_NaN());
    for (Blob* input : net.input_blobs()) test::FillGaussian(input, 0.f, 1.f, 100 + trial);
    const std::vector<int> order = RandomOrder(graph, &random);
    ASSERT_TRUE(graph.Allows(order));
    for (int step : order) net.ForwardStep(step);
    for (size_t o = 0; o < outputs.size(); ++o) {
      const std::vector<float> actual = test::DataOf(*outputs[o]);
      ASSERT_EQ(actual.size(), expected[o].size());
      for (size_t i = 0; i < actual.size(); ++i)
        ASSERT_EQ(Bits(actual[i]), Bits(expected[o][i])) << "trial " << trial << ", output " << o << " value " << i
                                                         << ": " << actual[i] << " against " << expected[o][i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, StepGraphExamplesTest,
                         ::testing::Values(ExampleNet{"fashion_mnist/lenet_deploy.prototxt", true},
                                           ExampleNet{"cifar10/cifar10_quick_deploy.prototxt", true},
                                           ExampleNet{"imagenet/googlenet_deploy.prototxt", true},
                                           ExampleNet{"imagenet/googlenet_deploy.prototxt", false},
                                           ExampleNet{"imagenet/resnet50_deploy.prototxt", true}),
                         [](const ::testing::TestParamInfo<ExampleNet>& info) {
                           std::string name = info.param.prototxt;
                           name = name.substr(name.find('/') + 1);
                           name = name.substr(0, name.find('.'));
                           return name + (info.param.plan_memory ? "_planned" : "_unplanned");
                         });

}  // namespace
}  // namespace crema
