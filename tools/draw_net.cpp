// draw_net: a net as a picture of its layers and blobs, Caffe's tool with its usage.
//
//   draw_net [--rankdir=LR|TB|BT|RL] [--phase=TRAIN|TEST|ALL] NET.prototxt OUT.{svg,png,pdf,dot}
//
// .dot writes Graphviz's text; any other extension is rendered by Graphviz's `dot` (Debian package graphviz).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "net/upgrade.hpp"
#include "tools/lib/net_graph.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(rankdir, "LR", "The direction the graph runs: LR (left to right), TB, BT or RL");
DEFINE_string(phase, "ALL", "The layers to draw: TRAIN's, TEST's (by their include/exclude rules), or ALL");

namespace {

// The net as its file states it: the one place draw_net reads a net, where legacy V1 files (the `layers`
// field) are turned into layers.
crema::NetParameter ReadNet(const std::string& path) {
  crema::NetParameter net;
  crema::ReadProtoFromTextFile(path, &net);
  crema::UpgradeLegacyNetAndLog(&net, path);
  return net;
}

}  // namespace

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"draw_net",
       "draws a net's layers and blobs as a graph\n"
       "usage: draw_net [--rankdir=LR|TB|BT|RL] [--phase=TRAIN|TEST|ALL] NET.prototxt OUT.{svg,png,pdf,dot}\n"
       "  .dot writes Graphviz's text; other formats are rendered by Graphviz's dot (Debian package graphviz)",
       2, 2, google::GLOG_WARNING},  // building the net for its shapes would log every layer; warnings still show
      [](const std::vector<std::string>& arguments) {
        crema::NetGraphOptions options;
        options.phase = crema::ParseGraphPhase(FLAGS_phase);
        const crema::NetGraph graph = crema::BuildNetGraph(ReadNet(arguments[0]), options);
        if (!graph.shapes_unavailable.empty())
          std::fprintf(stderr, "draw_net: blobs drawn without shapes: %s\n", graph.shapes_unavailable.c_str());
        std::printf("Drawing net to %s\n", arguments[1].c_str());
        std::fflush(stdout);
        crema::WriteNetGraph(crema::NetGraphToDot(graph, FLAGS_rankdir), arguments[1]);
        return 0;
      });
}
