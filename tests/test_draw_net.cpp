// draw_net: the graph of a net (every layer and blob a node, an edge for every bottom and top, in-place layers
// chained instead of drawing their blob twice), phase filtering, blob shapes where the net can be built and
// none where it cannot, the DOT text, and pictures rendered by Graphviz (skipped where `dot` is missing).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "test_util.hpp"
#include "tools/lib/net_graph.hpp"

namespace crema {
namespace {

const std::string kTool = test::ToolsDir() + "/draw_net";

std::string Example(const std::string& path) { return test::SourceDir() + "/examples/" + path; }

NetParameter ReadNet(const std::string& path) {
  NetParameter net;
  ReadProtoFromTextFile(path, &net);
  return net;
}

bool DotInstalled() {
  std::string output;
  return test::RunCommand("command -v dot", &output) == 0;
}

#define SKIP_WITHOUT_DOT() \
  if (!DotInstalled()) GTEST_SKIP() << "Graphviz's dot is not installed (Debian package graphviz): no pictures"

// The edges into and out of a node, as (other node's id, blob) pairs.
std::multiset<std::pair<std::string, std::string>> EdgesInto(const NetGraph& graph, int node) {
  std::multiset<std::pair<std::string, std::string>> edges;
  for (const auto& edge : graph.edges)
    if (edge.to == node) edges.insert({graph.nodes[edge.from].id, edge.blob});
  return edges;
}
std::multiset<std::pair<std::string, std::string>> EdgesOutOf(const NetGraph& graph, int node) {
  std::multiset<std::pair<std::string, std::string>> edges;
  for (const auto& edge : graph.edges)
    if (edge.from == node) edges.insert({graph.nodes[edge.to].id, edge.blob});
  return edges;
}

bool InPlace(const LayerParameter& layer, const std::string& top) {
  return std::find(layer.bottom().begin(), layer.bottom().end(), top) != layer.bottom().end();
}

// What every graph must satisfy, checked against the NetParameter it was drawn from: a node per layer and per
// blob name, an edge into each layer for each bottom (from the blob's node, or from an in-place layer that
// rewrote that blob), an edge to the blob's node for each top that is not in place, and no other edges.
void ExpectGraphMatches(const NetParameter& drawn, const NetGraph& graph) {
  std::set<std::string> blobs;
  size_t expected_edges = 0;
  std::map<std::string, int> seen;
  for (const auto& layer : drawn.layer()) {
    const int repeat = ++seen[layer.name()];
    const std::string id = "layer:" + layer.name() + (repeat > 1 ? "#" + std::to_string(repeat) : "");
    int node = -1;
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      if (graph.nodes[i].id == id) node = static_cast<int>(i);
    ASSERT_GE(node, 0) << id;
    EXPECT_TRUE(graph.nodes[node].is_layer);
    EXPECT_EQ(graph.nodes[node].type, layer.type());
    const auto into = EdgesInto(graph, node);
    EXPECT_EQ(into.size(), static_cast<size_t>(layer.bottom_size())) << id;
    for (const std::string& bottom : layer.bottom()) {
      bool found = false;
      for (const auto& [from, blob] : into) {
        if (blob != bottom) continue;
        if (from == "blob:" + bottom) found = true;
        // An in-place layer that rewrote the blob.
        for (const auto& other : drawn.layer())
          if (from.rfind("layer:" + other.name(), 0) == 0 && InPlace(other, bottom)) found = true;
      }
      EXPECT_TRUE(found) << id << " reads " << bottom;
      blobs.insert(bottom);
    }
    const auto out = EdgesOutOf(graph, node);
    for (const std::string& top : layer.top()) {
      blobs.insert(top);
      if (InPlace(layer, top)) continue;
      EXPECT_EQ(out.count({"blob:" + top, top}), 1u) << id << " writes " << top;
      ++expected_edges;
    }
    expected_edges += layer.bottom_size();
  }
  for (const std::string& blob : blobs) EXPECT_GE(graph.BlobNode(blob), 0) << blob;
  size_t blob_nodes = 0;
  for (const auto& node : graph.nodes) blob_nodes += !node.is_layer;
  EXPECT_EQ(blob_nodes, blobs.size());
  EXPECT_EQ(graph.edges.size(), expected_edges);
}

TEST(DrawNetTest, EveryLayerAndBlobOfLeNetInEveryPhase) {
  const NetParameter net = ReadNet(Example("fashion_mnist/lenet_train_test.prototxt"));
  NetGraphOptions options;
  options.shapes = false;
  const NetGraph all = BuildNetGraph(net, options);
  ExpectGraphMatches(net, all);
  EXPECT_EQ(all.title, "LeNet (all phases)");
  // Two data layers of one name (TRAIN's and TEST's), both feeding the one data blob, each saying its phase.
  const int train_data = all.LayerNode("fashion_mnist");
  ASSERT_GE(train_data, 0);
  EXPECT_EQ(all.nodes[train_data].id, "layer:fashion_mnist");
  EXPECT_EQ(all.nodes[train_data].details,
            std::vector<std::string>({"batch 64, LMDB", "fashion_mnist_train_lmdb", "TRAIN only"}));
  int test_data = -1;
  for (size_t i = 0; i < all.nodes.size(); ++i)
    if (all.nodes[i].id == "layer:fashion_mnist#2") test_data = static_cast<int>(i);
  ASSERT_GE(test_data, 0);
  EXPECT_EQ(all.nodes[test_data].details.back(), "TEST only");
  EXPECT_EQ(EdgesInto(all, all.BlobNode("data")).size(), 2u);

  for (const auto& [phase, name] :
       {std::make_pair(GraphPhase::kTrain, TRAIN), std::make_pair(GraphPhase::kTest, TEST)}) {
    options.phase = phase;
    const NetGraph graph = BuildNetGraph(net, options);
    int kept = 0;
    NetParameter expected = net;
    expected.clear_layer();
    for (const auto& layer : net.layer()) {
      // The rule by hand: LeNet's layers are either in both phases or include one.
      if (layer.include_size() == 0 || layer.include(0).phase() == name) {
        *expected.add_layer() = layer;
        ++kept;
      }
    }
    ExpectGraphMatches(expected, graph);
    int layers = 0;
    for (const auto& node : graph.nodes) layers += node.is_layer;
    EXPECT_EQ(layers, kept);
    EXPECT_EQ(graph.LayerNode("accuracy") >= 0, name == TEST);
    EXPECT_EQ(graph.title, std::string("LeNet (") + (name == TRAIN ? "TRAIN" : "TEST") + ")");
  }
}

// relu1 works in place on ip1: the blob is drawn once, relu1 hangs after it and feeds ip2 itself.
TEST(DrawNetTest, InPlaceLayersAreChained) {
  const NetParameter net = test::ParseNet(R"(
    name: "chain"
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
    layer { name: "early" type: "Sigmoid" bottom: "c" top: "early" }
    layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" }
    layer { name: "scale" type: "Scale" bottom: "c" top: "c" scale_param { bias_term: true } }
    layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
    layer { name: "pool" type: "Pooling" bottom: "c" top: "p" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "sum" type: "Eltwise" bottom: "c" bottom: "early" top: "sum" }
  )");
  const NetGraph graph = BuildNetGraph(net);
  ExpectGraphMatches(net, graph);
  using Edges = std::multiset<std::pair<std::string, std::string>>;
  // One node for c; "early" read it before the in-place layers ran, so from the blob's node.
  EXPECT_EQ(EdgesOutOf(graph, graph.BlobNode("c")), Edges({{"layer:early", "c"}, {"layer:bn", "c"}}));
  EXPECT_EQ(EdgesOutOf(graph, graph.LayerNode("bn")), Edges({{"layer:scale", "c"}}));
  EXPECT_EQ(EdgesOutOf(graph, graph.LayerNode("scale")), Edges({{"layer:relu", "c"}}));
  EXPECT_EQ(EdgesOutOf(graph, graph.LayerNode("relu")), Edges({{"layer:pool", "c"}, {"layer:sum", "c"}}));
  EXPECT_EQ(EdgesInto(graph, graph.LayerNode("sum")), Edges({{"layer:relu", "c"}, {"blob:early", "early"}}));

  // The DOT text has the same nodes and edges, each edge once.
  const std::string dot = NetGraphToDot(graph);
  for (const auto& node : graph.nodes) EXPECT_NE(dot.find("  \"" + node.id + "\" ["), std::string::npos) << node.id;
  for (const auto& edge : graph.edges) {
    const std::string line = "  \"" + graph.nodes[edge.from].id + "\" -> \"" + graph.nodes[edge.to].id + "\"";
    const size_t at = dot.find(line);
    EXPECT_NE(at, std::string::npos) << line;
    EXPECT_EQ(dot.find(line, at + 1), std::string::npos) << line;
  }
  size_t arrows = 0;
  for (size_t at = dot.find(" -> "); at != std::string::npos; at = dot.find(" -> ", at + 1)) ++arrows;
  EXPECT_EQ(arrows, graph.edges.size());
  EXPECT_NE(dot.find("label=\"pool\\n(Pooling)\\nAVE global\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"scale\\n(Scale)\\nwith bias\""), std::string::npos) << dot;
  // crema builds no net whose blob is rewritten in place after another layer read it: drawn all the same,
  // without shapes, saying why.
  EXPECT_NE(graph.shapes_unavailable.find("layer 'bn'"), std::string::npos) << graph.shapes_unavailable;

  // Without the early reader the net builds: every blob carries its shape; c keeps 8 x 8 (kernel 3, pad 1).
  NetParameter buildable = net;
  buildable.mutable_layer()->DeleteSubrange(7, 1);
  buildable.mutable_layer()->DeleteSubrange(2, 1);
  const NetGraph shaped = BuildNetGraph(buildable);
  ExpectGraphMatches(buildable, shaped);
  EXPECT_TRUE(shaped.shapes_unavailable.empty()) << shaped.shapes_unavailable;
  EXPECT_EQ(shaped.nodes[shaped.BlobNode("c")].details, std::vector<std::string>({"2 x 4 x 8 x 8"}));
  EXPECT_EQ(shaped.nodes[shaped.BlobNode("p")].details, std::vector<std::string>({"2 x 4 x 1 x 1"}));
  EXPECT_NE(NetGraphToDot(shaped).find("label=\"c\\n2 x 4 x 8 x 8\""), std::string::npos);
}

// LeNet's deploy net builds without data: shapes worked out by hand from its layers (28 -> conv 5 -> 24 ->
// pool 2 -> 12 -> conv 5 -> 8 -> pool 2 -> 4).
TEST(DrawNetTest, ShapesWhereTheNetBuilds) {
  const NetGraph graph = BuildNetGraph(ReadNet(Example("fashion_mnist/lenet_deploy.prototxt")));
  EXPECT_TRUE(graph.shapes_unavailable.empty()) << graph.shapes_unavailable;
  EXPECT_EQ(graph.title, "LeNet");  // no phase to name: its layers are the same in every phase
  const std::map<std::string, std::string> expected = {{"data", "64 x 1 x 28 x 28"},
                                                       {"conv1", "64 x 20 x 24 x 24"},
                                                       {"pool1", "64 x 20 x 12 x 12"},
                                                       {"conv2", "64 x 50 x 8 x 8"},
                                                       {"pool2", "64 x 50 x 4 x 4"},
                                                       {"ip1", "64 x 500"},
                                                       {"ip2", "64 x 10"},
                                                       {"prob", "64 x 10"}};
  for (const auto& [blob, shape] : expected) {
    const int node = graph.BlobNode(blob);
    ASSERT_GE(node, 0) << blob;
    EXPECT_EQ(graph.nodes[node].details, std::vector<std::string>({shape})) << blob;
  }
  const int conv1 = graph.LayerNode("conv1");
  EXPECT_EQ(graph.nodes[conv1].details, std::vector<std::string>({"20 outputs", "kernel 5x5, stride 1"}));
  EXPECT_EQ(graph.nodes[graph.LayerNode("pool1")].details, std::vector<std::string>({"MAX 2x2, stride 2"}));
  EXPECT_EQ(graph.nodes[graph.LayerNode("ip1")].details, std::vector<std::string>({"500 outputs"}));

  // The deprecated net-level input fields are drawn as an Input layer, and build too.
  const NetGraph old = BuildNetGraph(test::ParseNet(R"(
    name: "old" input: "data" input_dim: 1 input_dim: 3 input_dim: 10 input_dim: 10
    layer { name: "pool" type: "Pooling" bottom: "data" top: "pool"
            pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
    layer { name: "drop" type: "Dropout" bottom: "pool" top: "pool" dropout_param { dropout_ratio: 0.3 } }
  )"));
  ASSERT_GE(old.LayerNode("input"), 0);
  EXPECT_EQ(old.nodes[old.LayerNode("input")].type, "Input");
  EXPECT_EQ(old.nodes[old.LayerNode("input")].details, std::vector<std::string>({"1 x 3 x 10 x 10"}));
  // Caffe's rounding up: (10 - 3) / 2 rounded up, plus 1.
  EXPECT_EQ(old.nodes[old.BlobNode("pool")].details, std::vector<std::string>({"1 x 3 x 5 x 5"}));
  EXPECT_EQ(old.nodes[old.LayerNode("drop")].details, std::vector<std::string>({"ratio 0.3"}));
}

// A train/test net away from its data is still drawn, without shapes, saying why.
TEST(DrawNetTest, AMissingDataSourceLeavesOutTheShapesOnly) {
  test::TempDir dir;
  NetParameter net = ReadNet(Example("fashion_mnist/lenet_train_test.prototxt"));
  for (auto& layer : *net.mutable_layer())
    if (layer.type() == "Data") layer.mutable_data_param()->set_source(dir.file("no_such_lmdb"));
  NetGraphOptions options;
  options.phase = GraphPhase::kTrain;
  const NetGraph graph = BuildNetGraph(net, options);
  EXPECT_NE(graph.shapes_unavailable.find(dir.file("no_such_lmdb")), std::string::npos) << graph.shapes_unavailable;
  for (const auto& node : graph.nodes) {
    if (!node.is_layer) {
      EXPECT_TRUE(node.details.empty()) << node.name;
    }
  }
  // All phases at once have no one shape per blob.
  options.phase = GraphPhase::kAll;
  EXPECT_NE(BuildNetGraph(net, options).shapes_unavailable.find("--phase=TRAIN or TEST"), std::string::npos);

  WriteProtoToTextFile(net, dir.file("net.prototxt"));
  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " --phase=TEST " + dir.file("net.prototxt") + " " + dir.file("net.dot"), &output),
            0)
      << output;
  EXPECT_NE(output.find("draw_net: blobs drawn without shapes: "), std::string::npos) << output;
  EXPECT_NE(test::FileBytes(dir.file("net.dot")).find("\"layer:accuracy\""), std::string::npos);
}

// The tool reads Caffe's V1 nets as every crema tool does: upgraded, with a notice, then drawn.
TEST(DrawNetTest, TheToolDrawsALegacyV1Net) {
  test::TempDir dir;
  WriteStringToFileAtomically(R"(
    name: 'old'
    input: 'data' input_dim: 1 input_dim: 1 input_dim: 8 input_dim: 8
    layers { name: 'conv' type: CONVOLUTION bottom: 'data' top: 'conv' blobs_lr: 1 blobs_lr: 2
             convolution_param { num_output: 4 kernel_size: 3 } }
    layers { name: 'relu' type: RELU bottom: 'conv' top: 'conv' }
    layers { name: 'prob' type: SOFTMAX bottom: 'conv' top: 'prob' }
  )",
                              dir.file("v1.prototxt"));
  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " " + dir.file("v1.prototxt") + " " + dir.file("v1.dot"), &output), 0) << output;
  EXPECT_NE(output.find("V1 format"), std::string::npos) << output;
  const std::string dot = test::FileBytes(dir.file("v1.dot"));
  for (const std::string layer : {"\"layer:conv\"", "\"layer:relu\"", "\"layer:prob\""})
    EXPECT_NE(dot.find(layer), std::string::npos) << layer << "\n" << dot;
  // The upgraded net builds, so its blobs carry their shapes: conv is 1 x 4 x 6 x 6.
  EXPECT_NE(dot.find("1 x 4 x 6 x 6"), std::string::npos) << dot;
}

TEST(DrawNetTest, GoogLeNetConcatsReadEveryBranch) {
  const NetParameter net = ReadNet(Example("imagenet/googlenet_deploy.prototxt"));
  const NetGraph graph = BuildNetGraph(net);
  ExpectGraphMatches(net, graph);
  int concats = 0;
  for (const auto& layer : net.layer()) {
    if (layer.type() != "Concat") continue;
    ++concats;
    EXPECT_EQ(EdgesInto(graph, graph.LayerNode(layer.name())).size(), 4u) << layer.name();
  }
  EXPECT_EQ(concats, 9);
  // The first inception module's four branches: 64 + 128 + 32 + 32 channels at 28 x 28.
  EXPECT_TRUE(graph.shapes_unavailable.empty()) << graph.shapes_unavailable;
  EXPECT_EQ(graph.nodes[graph.BlobNode("inception_3a/output")].details,
            std::vector<std::string>({"10 x 256 x 28 x 28"}));
}

TEST(DrawNetTest, DotTextAndItsErrors) {
  const NetParameter net = ReadNet(Example("fashion_mnist/lenet_deploy.prototxt"));
  const NetGraph graph = BuildNetGraph(net);
  // Top to bottom, a layer's name and type share its first line.
  const std::string vertical = NetGraphToDot(graph, "TB");
  EXPECT_NE(vertical.find("rankdir=TB"), std::string::npos);
  EXPECT_NE(vertical.find("label=\"conv1 (Convolution)\\n20 outputs; kernel 5x5, stride 1\""), std::string::npos)
      << vertical;
  test::ExpectErrorContaining([&] { NetGraphToDot(graph, "XY"); }, {"rankdir 'XY'", "LR, TB, BT or RL"});
  test::ExpectErrorContaining([] { ParseGraphPhase("deploy"); }, {"phase 'deploy'", "TRAIN, TEST or ALL"});
  EXPECT_EQ(ParseGraphPhase("train"), GraphPhase::kTrain);

  // Quotes and backslashes in names stay inside their strings.
  const NetGraph odd = BuildNetGraph(test::ParseNet(R"(
    name: "q\"uote"
    layer { name: "in\\put" type: "Input" top: "a\"b" input_param { shape { dim: 1 } } }
  )"));
  const std::string dot = NetGraphToDot(odd);
  EXPECT_NE(dot.find("digraph \"q\\\"uote\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"layer:in\\\\put\" -> \"blob:a\\\"b\""), std::string::npos) << dot;

  NetParameter legacy;
  legacy.set_name("v1");
  legacy.add_layers()->set_name("conv1");
  test::ExpectErrorContaining([&] { BuildNetGraph(legacy); }, {"net 'v1'", "legacy V1 'layers'", "upgrade"});

  test::TempDir dir;
  WriteNetGraph(NetGraphToDot(graph), dir.file("lenet.gv"));
  EXPECT_EQ(test::FileBytes(dir.file("lenet.gv")), NetGraphToDot(graph));
  // Graphviz missing, or failing.
  test::ExpectErrorContaining([&] { WriteNetGraph("digraph {}", dir.file("x.svg"), "crema-no-such-dot-program"); },
                              {dir.file("x.svg"), "'crema-no-such-dot-program'", "not installed", "graphviz"});
  test::ExpectErrorContaining([&] { WriteNetGraph("digraph {}", dir.file("x.svg"), "false"); },
                              {dir.file("x.svg"), "'false -Tsvg' failed with exit status 1"});
  EXPECT_FALSE(FileExists(dir.file("x.svg")));
  test::ExpectErrorContaining([&] { WriteNetGraph("digraph {}", dir.file("noextension")); },
                              {dir.file("noextension"), "extension"});
}

TEST(DrawNetTest, TheToolRendersWithGraphviz) {
  SKIP_WITHOUT_DOT();
  test::TempDir dir;
  std::string output;
  const std::string net = Example("fashion_mnist/lenet_train_test.prototxt");
  ASSERT_EQ(test::RunCommand(kTool + " --phase=TRAIN --rankdir=TB " + net + " " + dir.file("lenet.svg"), &output), 0)
      << output;
  std::string svg = test::FileBytes(dir.file("lenet.svg"));
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  // Graphviz names each node's group after its id, and writes the labels as text.
  for (const char* text : {"<title>layer:conv1</title>", "<title>blob:pool2</title>", ">relu1 (ReLU)</text>",
                           ">LeNet (TRAIN)</text>", "<title>layer:relu1&#45;&gt;layer:ip2</title>"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  EXPECT_EQ(svg.find("layer:accuracy"), std::string::npos);
  // The deploy net builds here: its blobs carry their shapes.
  ASSERT_EQ(test::RunCommand(
                kTool + " " + Example("fashion_mnist/lenet_deploy.prototxt") + " " + dir.file("deploy.svg"), &output),
            0)
      << output;
  svg = test::FileBytes(dir.file("deploy.svg"));
  EXPECT_NE(svg.find(">64 x 20 x 24 x 24</text>"), std::string::npos);

  ASSERT_EQ(test::RunCommand(kTool + " " + net + " " + dir.file("lenet.png"), &output), 0) << output;
  EXPECT_EQ(test::FileBytes(dir.file("lenet.png")).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  // A format Graphviz does not know: its own message.
  EXPECT_EQ(test::RunCommand(kTool + " " + net + " " + dir.file("lenet.nosuchformat"), &output), 1);
  EXPECT_NE(
      output.find("draw_net: error: cannot write " + dir.file("lenet.nosuchformat") + ": 'dot -Tnosuchformat' failed"),
      std::string::npos)
      << output;
  EXPECT_NE(output.find("nosuchformat"), std::string::npos);
  EXPECT_FALSE(FileExists(dir.file("lenet.nosuchformat")));
}

TEST(DrawNetTest, ToolErrors) {
  test::TempDir dir;
  std::string output;
  EXPECT_EQ(test::RunCommand(kTool + " " + dir.file("missing.prototxt") + " " + dir.file("x.dot"), &output), 1);
  EXPECT_NE(output.find("draw_net: error: "), std::string::npos) << output;
  EXPECT_NE(output.find(dir.file("missing.prototxt")), std::string::npos) << output;
  const std::string net = Example("fashion_mnist/lenet_deploy.prototxt");
  EXPECT_EQ(test::RunCommand(kTool + " --phase=VAL " + net + " " + dir.file("x.dot"), &output), 1);
  EXPECT_NE(output.find("draw_net: error: unknown phase 'VAL'"), std::string::npos) << output;
  EXPECT_EQ(test::RunCommand(kTool + " --rankdir=UP " + net + " " + dir.file("x.dot"), &output), 1);
  EXPECT_NE(output.find("unknown rankdir 'UP'"), std::string::npos) << output;
  EXPECT_EQ(test::RunCommand(kTool + " " + net, &output), 1);
  EXPECT_NE(output.find("usage: draw_net"), std::string::npos) << output;
  EXPECT_FALSE(FileExists(dir.file("x.dot")));
}

}  // namespace
}  // namespace crema
