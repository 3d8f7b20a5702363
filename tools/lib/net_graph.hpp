// A net as a graph of layers and blobs (draw_net), written as Graphviz DOT text and, through Graphviz's `dot`
// program, as SVG, PNG, PDF ...
//
// Layers are boxes (name, type and key parameters; data layers, losses, convolutions, poolings and inner
// products coloured apart), blobs octagons, an edge for every bottom and top. An in-place layer (a top named
// as one of its bottoms) does not draw the blob again: the blob's node feeds the first in-place layer, each
// in-place layer feeds the next, and the layers that read the blob afterwards are fed by the last of them, so
// the graph stays a chain (Caffe draws such a blob once, with edges in both directions). Where the net can be
// built (Input layers, deploy nets, data sources that exist) blobs carry their shapes.
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

// Which layers to draw: a phase's (by the include/exclude rules, with the net's level and stages), or all.
enum class GraphPhase { kTrain, kTest, kAll };
// "TRAIN", "TEST" or "ALL" (any case); throws naming the value otherwise.
GraphPhase ParseGraphPhase(const std::string& name);

struct NetGraphOptions {
  GraphPhase phase = GraphPhase::kAll;
  bool shapes = true;  // try building the net to label blobs with their shapes
};

struct NetGraph {
  struct Node {
    bool is_layer = false;
    std::string id;                    // unique: "layer:NAME" or "blob:NAME" ("layer:NAME#2" for a second layer
                                       // of one name, as two phases' data layers are)
    std::string name;                  // the layer's or the blob's
    std::string type;                  // a layer's type
    std::vector<std::string> details;  // a layer's key parameters; a blob's shape ("64 x 1 x 28 x 28")
  };
  struct Edge {
    int from = 0, to = 0;  // node indices
    std::string blob;      // the blob it carries
  };
  std::string title;  // the net's name, and the phase drawn where the net's layers differ by phase
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  // Why blobs carry no shapes (the error building the net met), or "" when they do or none were asked for.
  std::string shapes_unavailable;

  // The node of the (first) layer or the blob named `name`, or -1.
  int LayerNode(const std::string& name) const;
  int BlobNode(const std::string& name) const;
};

// The graph of `net` (net-level `input` fields drawn as an Input layer). Legacy V1 nets (the `layers` field)
// must be upgraded first; they are refused with an error saying so.
NetGraph BuildNetGraph(const NetParameter& net, const NetGraphOptions& options = {});

// A layer's key parameters, one short line each ("kernel 5x5, stride 1", "20 outputs", "MAX 2x2, stride 2").
std::vector<std::string> LayerDetails(const LayerParameter& layer);

// DOT text of the graph; rankdir is Graphviz's LR, TB, BT or RL (throws naming any other).
std::string NetGraphToDot(const NetGraph& graph, const std::string& rankdir = "LR");

// Writes DOT text to `path`: as it is for .dot and .gv, else rendered by Graphviz (`dot_program` -T<extension>,
// e.g. svg, png, pdf). Throws naming the path when writing fails, naming the program and the Debian package
// graphviz when it is not installed, and with the program's own message when it fails.
void WriteNetGraph(const std::string& dot, const std::string& path, const std::string& dot_program = "dot");

}  // namespace crema
