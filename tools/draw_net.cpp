// draw_net: a net as a picture of its layers and blobs, Caffe's tool with its usage.
//
//   draw_net [--rankdir=LR|TB|BT|RL] [--phase=TRAIN|TEST|ALL] NET.prototxt OUT.{svg,png,pdf,dot}
//
// .dot writes Graphviz's text; any other extension is rendered by Graphviz's `dot` (Debian package graphviz).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "io/proto_io.hpp"
#include "net/net_graph.hpp"
#include "net/upgrade.hpp"

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
  FLAGS_logtostderr = true;
  // Building the net for its shapes would log every layer; warnings still show.
  FLAGS_minloglevel = google::GLOG_WARNING;
  gflags::SetUsageMessage(
      "draws a net's layers and blobs as a graph\n"
      "usage: draw_net [--rankdir=LR|TB|BT|RL] [--phase=TRAIN|TEST|ALL] NET.prototxt OUT.{svg,png,pdf,dot}\n"
      "  .dot writes Graphviz's text; other formats are rendered by Graphviz's dot (Debian package graphviz)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 3) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "draw_net");
    return 1;
  }
  try {
    crema::NetGraphOptions options;
    options.phase = crema::ParseGraphPhase(FLAGS_phase);
    const crema::NetGraph graph = crema::BuildNetGraph(ReadNet(argv[1]), options);
    if (!graph.shapes_unavailable.empty())
      std::fprintf(stderr, "draw_net: blobs drawn without shapes: %s\n", graph.shapes_unavailable.c_str());
    std::printf("Drawing net to %s\n", argv[2]);
    std::fflush(stdout);
    crema::WriteNetGraph(crema::NetGraphToDot(graph, FLAGS_rankdir), argv[2]);
    return 0;
  } catch (const crema::Error& error) {
    std::fprintf(stderr, "draw_net: error: %s\n", error.what());
    return 1;
  }
}
