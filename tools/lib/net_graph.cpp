#include "tools/lib/net_graph.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "net/passes.hpp"

extern char** environ;

namespace crema {

namespace {

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// "5x5" for a square window given once, "3x5" for kernel_h/kernel_w, "3x3x3" for three spatial axes.
std::string Window(const google::protobuf::RepeatedField<uint32_t>& values, bool has_hw, uint32_t h, uint32_t w,
                   int axes = 2) {
  if (has_hw) return std::to_string(h) + "x" + std::to_string(w);
  if (values.empty()) return "";
  std::string text;
  if (values.size() == 1) {
    for (int i = 0; i < axes; ++i) text += (i ? "x" : "") + std::to_string(values[0]);
  } else {
    for (int i = 0; i < values.size(); ++i) text += (i ? "x" : "") + std::to_string(values[i]);
  }
  return text;
}

// One value for every axis ("1"), per axis ("1x2"), or, when none is given, `fallback`.
std::string PerAxis(const google::protobuf::RepeatedField<uint32_t>& values, bool has_hw, uint32_t h, uint32_t w,
                    const std::string& fallback) {
  if (has_hw) return h == w ? std::to_string(h) : std::to_string(h) + "x" + std::to_string(w);
  if (values.empty()) return fallback;
  bool same = true;
  for (uint32_t v : values) same = same && v == values[0];
  if (same) return std::to_string(values[0]);
  std::string text;
  for (int i = 0; i < values.size(); ++i) text += (i ? "x" : "") + std::to_string(values[i]);
  return text;
}

std::string ShapeText(const BlobShape& shape) {
  std::string text;
  for (int i = 0; i < shape.dim_size(); ++i) text += (i ? " x " : "") + std::to_string(shape.dim(i));
  return text.empty() ? "scalar" : text;
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? " x " : "") + std::to_string(shape[i]);
  return text.empty() ? "scalar" : text;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsDataLayer(const std::string& type) { return type == "Input" || EndsWith(type, "Data"); }

// A layer's colour by what it does.
const char* LayerColor(const std::string& type) {
  if (IsDataLayer(type)) return "#B7E1CD";
  if (EndsWith(type, "Loss")) return "#F4C7C3";
  if (type == "Convolution" || type == "Deconvolution" || type == "Im2col") return "#FCE8B2";
  if (type == "Pooling" || type == "SPP") return "#C9DAF8";
  if (type == "InnerProduct" || type == "Embed") return "#D9D2E9";
  if (type == "Accuracy") return "#FFF2CC";
  return "#E8EEF4";
}

// Quoted for DOT: a backslash and a quote escaped, so that a name can hold either.
std::string Quoted(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// A label's lines joined by DOT's centred line break.
std::string Label(const std::vector<std::string>& lines) {
  std::string joined;
  for (size_t i = 0; i < lines.size(); ++i) joined += (i ? "\n" : "") + lines[i];
  std::string quoted = "\"";
  for (char c : joined) {
    if (c == '\n') {
      quoted += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::string Extension(const std::string& path) {
  const std::string base = BaseName(path);
  const size_t dot = base.rfind('.');
  if (dot == std::string::npos) return "";
  std::string extension = base.substr(dot + 1);
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

// The phase to build the net in for shapes, or why there is none.
bool PhaseForShapes(const NetParameter& net, GraphPhase phase, Phase* build_phase, std::string* why_not) {
  if (phase != GraphPhase::kAll) {
    *build_phase = phase == GraphPhase::kTrain ? TRAIN : TEST;
    return true;
  }
  for (const auto& layer : net.layer()) {
    if (layer.include_size() || layer.exclude_size()) {
      *why_not =
          "all phases are drawn together and their shapes differ; draw one phase (--phase=TRAIN or TEST) to "
          "see them";
      return false;
    }
  }
  *build_phase = net.state().phase();
  return true;
}

}  // namespace

GraphPhase ParseGraphPhase(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "TRAIN") return GraphPhase::kTrain;
  if (upper == "TEST") return GraphPhase::kTest;
  CREMA_CHECK(upper == "ALL") << "unknown phase '" << name << "'; expected TRAIN, TEST or ALL";
  return GraphPhase::kAll;
}

int NetGraph::LayerNode(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].is_layer && nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

int NetGraph::BlobNode(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].is_layer && nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> LayerDetails(const LayerParameter& layer) {
  std::vector<std::string> details;
  const std::string& type = layer.type();
  if (type == "Convolution" || type == "Deconvolution") {
    const auto& p = layer.convolution_param();
    if (p.has_num_output()) details.push_back(std::to_string(p.num_output()) + " outputs");
    const std::string kernel = Window(p.kernel_size(), p.has_kernel_h(), p.kernel_h(), p.kernel_w());
    std::string window = kernel.empty() ? "" : "kernel " + kernel;
    const std::string stride = PerAxis(p.stride(), p.has_stride_h(), p.stride_h(), p.stride_w(), "1");
    window += (window.empty() ? "stride " : ", stride ") + stride;
    details.push_back(window);
    const std::string pad = PerAxis(p.pad(), p.has_pad_h() || p.has_pad_w(), p.pad_h(), p.pad_w(), "0");
    if (pad != "0") details.push_back("pad " + pad);
    const std::string dilation = PerAxis(p.dilation(), false, 0, 0, "1");
    if (dilation != "1") details.push_back("dilation " + dilation);
    if (p.group() != 1) details.push_back("group " + std::to_string(p.group()));
  } else if (type == "Pooling") {
    const auto& p = layer.pooling_param();
    std::string line = PoolingParameter_PoolMethod_Name(p.pool());
    if (p.global_pooling()) {
      line += " global";
    } else {
      if (p.has_kernel_h() || p.has_kernel_w()) {
        line += " " + std::to_string(p.kernel_h()) + "x" + std::to_string(p.kernel_w());
      } else if (p.has_kernel_size()) {
        line += " " + std::to_string(p.kernel_size()) + "x" + std::to_string(p.kernel_size());
      }
      const bool hw = p.has_stride_h() || p.has_stride_w();
      const uint32_t sh = hw ? p.stride_h() : p.stride(), sw = hw ? p.stride_w() : p.stride();
      line += ", stride " + (sh == sw ? std::to_string(sh) : std::to_string(sh) + "x" + std::to_string(sw));
    }
    details.push_back(line);
    const bool pad_hw = p.has_pad_h() || p.has_pad_w();
    const uint32_t ph = pad_hw ? p.pad_h() : p.pad(), pw = pad_hw ? p.pad_w() : p.pad();
    if (ph || pw)
      details.push_back("pad " + (ph == pw ? std::to_string(ph) : std::to_string(ph) + "x" + std::to_string(pw)));
  } else if (type == "InnerProduct") {
    if (layer.inner_product_param().has_num_output())
      details.push_back(std::to_string(layer.inner_product_param().num_output()) + " outputs");
  } else if (type == "Embed") {
    const auto& p = layer.embed_param();
    details.push_back(std::to_string(p.num_output()) + " outputs, vocabulary " + std::to_string(p.input_dim()));
  } else if (type == "Dropout") {
    details.push_back("ratio " + Number(layer.dropout_param().dropout_ratio()));
  } else if (type == "LRN") {
    const auto& p = layer.lrn_param();
    details.push_back("size " + std::to_string(p.local_size()) + ", alpha " + Number(p.alpha()) + ", beta " +
                      Number(p.beta()));
    if (p.norm_region() == LRNParameter::WITHIN_CHANNEL) details.push_back("within channel");
  } else if (type == "Eltwise") {
    std::string line = EltwiseParameter_EltwiseOp_Name(layer.eltwise_param().operation());
    for (int i = 0; i < layer.eltwise_param().coeff_size(); ++i)
      line += (i ? ", " : " ") + Number(layer.eltwise_param().coeff(i));
    details.push_back(line);
  } else if (type == "Concat") {
    const auto& p = layer.concat_param();
    const int axis = p.has_axis() ? p.axis() : static_cast<int>(p.concat_dim());
    if (axis != 1) details.push_back("axis " + std::to_string(axis));
  } else if (type == "Slice") {
    const auto& p = layer.slice_param();
    const int axis = p.has_axis() ? p.axis() : static_cast<int>(p.slice_dim());
    std::string line = "axis " + std::to_string(axis);
    if (p.slice_point_size()) {
      line += ", at";
      for (uint32_t point : p.slice_point()) line += " " + std::to_string(point);
    }
    details.push_back(line);
  } else if (type == "Data") {
    const auto& p = layer.data_param();
    details.push_back("batch " + std::to_string(p.batch_size()) + ", " + DataParameter_DB_Name(p.backend()));
    if (p.has_source()) details.push_back(BaseName(p.source()));
  } else if (type == "ImageData") {
    details.push_back("batch " + std::to_string(layer.image_data_param().batch_size()));
    if (layer.image_data_param().has_source()) details.push_back(BaseName(layer.image_data_param().source()));
  } else if (type == "HDF5Data") {
    details.push_back("batch " + std::to_string(layer.hdf5_data_param().batch_size()));
    if (layer.hdf5_data_param().has_source()) details.push_back(BaseName(layer.hdf5_data_param().source()));
  } else if (type == "Input") {
    for (const auto& shape : layer.input_param().shape()) details.push_back(ShapeText(shape));
  } else if (type == "DummyData") {
    for (const auto& shape : layer.dummy_data_param().shape()) details.push_back(ShapeText(shape));
  } else if (type == "MemoryData") {
    const auto& p = layer.memory_data_param();
    details.push_back(std::to_string(p.batch_size()) + " x " + std::to_string(p.channels()) + " x " +
                      std::to_string(p.height()) + " x " + std::to_string(p.width()));
  } else if (type == "Accuracy") {
    if (layer.accuracy_param().top_k() != 1) details.push_back("top " + std::to_string(layer.accuracy_param().top_k()));
  } else if (type == "ReLU") {
    if (layer.relu_param().negative_slope() != 0)
      details.push_back("negative slope " + Number(layer.relu_param().negative_slope()));
  } else if (type == "Reshape") {
    details.push_back("shape " + ShapeText(layer.reshape_param().shape()));
  } else if (type == "Flatten") {
    const auto& p = layer.flatten_param();
    if (p.axis() != 1 || p.end_axis() != -1)
      details.push_back("axes " + std::to_string(p.axis()) + " to " + std::to_string(p.end_axis()));
  } else if (type == "BatchNorm") {
    if (layer.batch_norm_param().has_use_global_stats())
      details.push_back(layer.batch_norm_param().use_global_stats() ? "global statistics" : "batch statistics");
  } else if (type == "Scale") {
    if (layer.scale_param().bias_term()) details.push_back("with bias");
  } else if (type == "Power") {
    const auto& p = layer.power_param();
    details.push_back("power " + Number(p.power()) + ", scale " + Number(p.scale()) + ", shift " + Number(p.shift()));
  } else if (type == "Crop") {
    std::string line = "axis " + std::to_string(layer.crop_param().axis());
    if (layer.crop_param().offset_size()) {
      line += ", offset";
      for (uint32_t offset : layer.crop_param().offset()) line += " " + std::to_string(offset);
    }
    details.push_back(line);
  }
  bool weighted = false;
  for (float weight : layer.loss_weight()) weighted = weighted || weight != 1;
  if (weighted) {
    std::string line = "loss weight";
    for (float weight : layer.loss_weight()) line += " " + Number(weight);
    details.push_back(line);
  }
  return details;
}

NetGraph BuildNetGraph(const NetParameter& net, const NetGraphOptions& options) {
  CREMA_CHECK(net.layers_size() == 0 || net.layer_size() > 0)
      << "net '" << net.name() << "' lists its layers in the legacy V1 'layers' field; upgrade it first "
      << "(upgrade_net_proto_text) and draw the result";
  NetParameter drawn = UpgradeInputs(net);
  if (options.phase != GraphPhase::kAll) {
    drawn.mutable_state()->set_phase(options.phase == GraphPhase::kTrain ? TRAIN : TEST);
    drawn = FilterNet(drawn);
  }

  NetGraph graph;
  graph.title = net.name().empty() ? "net" : net.name();
  bool phased = false;  // whether any layer belongs to some phases only
  for (const auto& layer : drawn.layer()) phased = phased || layer.include_size() > 0 || layer.exclude_size() > 0;
  if (options.phase == GraphPhase::kTrain) graph.title += " (TRAIN)";
  if (options.phase == GraphPhase::kTest) graph.title += " (TEST)";
  if (options.phase == GraphPhase::kAll && phased) graph.title += " (all phases)";
  std::map<std::string, int> blob_nodes;
  // The node that feeds a blob's readers: the blob's own node, or the last in-place layer that rewrote it.
  std::map<std::string, int> feeders;
  std::map<std::string, int> layers_named;
  const auto blob_node = [&](const std::string& name) {
    auto found = blob_nodes.find(name);
    if (found != blob_nodes.end()) return found->second;
    NetGraph::Node node;
    node.id = "blob:" + name;
    node.name = name;
    graph.nodes.push_back(node);
    return blob_nodes[name] = static_cast<int>(graph.nodes.size()) - 1;
  };
  for (const LayerParameter& layer : drawn.layer()) {
    NetGraph::Node node;
    node.is_layer = true;
    const int repeat = ++layers_named[layer.name()];
    node.id = "layer:" + layer.name() + (repeat > 1 ? "#" + std::to_string(repeat) : "");
    node.name = layer.name();
    node.type = layer.type();
    node.details = LayerDetails(layer);
    // Drawn together, the phases' own layers say whose they are.
    if (options.phase == GraphPhase::kAll) {
      for (const auto& rule : layer.include())
        if (rule.has_phase()) node.details.push_back(Phase_Name(rule.phase()) + " only");
      for (const auto& rule : layer.exclude())
        if (rule.has_phase()) node.details.push_back("not in " + Phase_Name(rule.phase()));
    }
    graph.nodes.push_back(node);
    const int layer_node = static_cast<int>(graph.nodes.size()) - 1;
    const std::set<std::string> bottoms(layer.bottom().begin(), layer.bottom().end());
    for (const std::string& bottom : layer.bottom()) {
      auto feeder = feeders.find(bottom);
      const int from = feeder != feeders.end() ? feeder->second : (feeders[bottom] = blob_node(bottom));
      graph.edges.push_back({from, layer_node, bottom});
    }
    for (const std::string& top : layer.top()) {
      if (bottoms.count(top)) {
        feeders[top] = layer_node;
      } else {
        const int to = blob_node(top);
        graph.edges.push_back({layer_node, to, top});
        feeders[top] = to;
      }
    }
  }

  Phase build_phase = TEST;
  if (options.shapes && PhaseForShapes(net, options.phase, &build_phase, &graph.shapes_unavailable)) {
    try {
      NetParameter buildable = net;
      buildable.mutable_state()->set_phase(build_phase);
      const Net built(buildable);
      std::map<std::string, std::vector<int>> shapes;
      for (size_t i = 0; i < built.blob_names().size(); ++i) shapes[built.blob_names()[i]] = built.blobs()[i]->shape();
      for (auto& node : graph.nodes) {
        if (node.is_layer) continue;
        auto shape = shapes.find(node.name);
        if (shape != shapes.end()) node.details.push_back(ShapeText(shape->second));
      }
    } catch (const std::exception& error) {
      // A data source that is not there (a train/test net away from its data) leaves the graph without shapes.
      graph.shapes_unavailable = error.what();
    }
  }
  return graph;
}

std::string NetGraphToDot(const NetGraph& graph, const std::string& rankdir) {
  CREMA_CHECK(rankdir == "LR" || rankdir == "TB" || rankdir == "BT" || rankdir == "RL")
      << "unknown rankdir '" << rankdir << "'; expected LR, TB, BT or RL";
  // Drawn left to right, boxes stack their lines; top to bottom, a layer's name and type share a line, so
  // that the boxes stay low.
  const bool vertical = rankdir == "TB" || rankdir == "BT";
  std::ostringstream dot;
  dot << "digraph " << Quoted(graph.title) << " {\n"
      << "  graph [rankdir=" << rankdir << ", label=" << Quoted(graph.title)
      << ", labelloc=t, fontname=\"Helvetica\", fontsize=14, nodesep=0.2, ranksep=0.3];\n"
      << "  node [fontname=\"Helvetica\", fontsize=10, penwidth=0.8];\n"
      << "  edge [color=\"#666666\", arrowsize=0.6];\n";
  for (const NetGraph::Node& node : graph.nodes) {
    std::vector<std::string> lines;
    if (node.is_layer) {
      if (vertical) {
        lines.push_back(node.name + " (" + node.type + ")");
        std::string joined;
        for (size_t i = 0; i < node.details.size(); ++i) joined += (i ? "; " : "") + node.details[i];
        if (!joined.empty()) lines.push_back(joined);
      } else {
        lines.push_back(node.name);
        lines.push_back("(" + node.type + ")");
        lines.insert(lines.end(), node.details.begin(), node.details.end());
      }
      dot << "  " << Quoted(node.id) << " [shape=box, style=\"rounded,filled\", fillcolor=\"" << LayerColor(node.type)
          << "\", color=\"#555555\", label=" << Label(lines) << "];\n";
    } else {
      lines.push_back(node.name);
      lines.insert(lines.end(), node.details.begin(), node.details.end());
      dot << "  " << Quoted(node.id)
          << " [shape=octagon, style=filled, fillcolor=\"#F2F2F2\", color=\"#999999\", fontsize=9, margin=\"0.05,0.02\""
          << ", label=" << Label(lines) << "];\n";
    }
  }
  for (const NetGraph::Edge& edge : graph.edges)
    dot << "  " << Quoted(graph.nodes[edge.from].id) << " -> " << Quoted(graph.nodes[edge.to].id)
        << " [tooltip=" << Quoted(edge.blob) << "];\n";
  dot << "}\n";
  return dot.str();
}

void WriteNetGraph(const std::string& dot, const std::string& path, const std::string& dot_program) {
  const std::string format = Extension(path);
  if (format == "dot" || format == "gv") {
    WriteStringToFileAtomically(dot, path);
    return;
  }
  CREMA_CHECK(!format.empty()) << path << ": cannot tell the picture's format without an extension; end the name "
                               << "in .svg, .png, .pdf or .dot";
  CREMA_CHECK(
      std::all_of(format.begin(), format.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
      << path << ": '" << format << "' is not a format Graphviz knows";
  // The DOT text goes through a file, the picture to a temporary name beside `path` that replaces it only
  // once Graphviz succeeded; Graphviz's messages are kept for the error.
  const std::string folder = FolderOf(path);
  char input[] = "/tmp/crema-graph-XXXXXX";
  const int input_fd = mkstemp(input);
  CREMA_CHECK(input_fd >= 0) << "cannot create a temporary file for the DOT text: " << std::strerror(errno);
  const bool written = ::write(input_fd, dot.data(), dot.size()) == static_cast<ssize_t>(dot.size());
  ::close(input_fd);
  char messages[] = "/tmp/crema-graph-messages-XXXXXX";
  const int messages_fd = mkstemp(messages);
  const std::string output =
      (std::filesystem::path(folder) / ("." + BaseName(path) + ".tmp" + std::to_string(getpid()))).string();
  const auto clean_up = [&] {
    std::remove(input);
    if (messages_fd >= 0) {
      ::close(messages_fd);
      std::remove(messages);
    }
  };
  if (!written || messages_fd < 0) {
    clean_up();
    CREMA_FAIL() << "cannot write the DOT text to a temporary file: " << std::strerror(errno);
  }

  const std::string format_flag = "-T" + format;
  std::vector<char*> argv = {const_cast<char*>(dot_program.c_str()),
                             const_cast<char*>(format_flag.c_str()),
                             const_cast<char*>("-o"),
                             const_cast<char*>(output.c_str()),
                             input,
                             nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, messages_fd, STDERR_FILENO);
  pid_t child = 0;
  const int spawned = posix_spawnp(&child, dot_program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    clean_up();
    if (spawned == ENOENT)
      CREMA_FAIL() << "cannot write " << path << ": Graphviz's '" << dot_program << "' program is not installed "
                   << "(Debian: apt-get install graphviz); or write a .dot file and render it elsewhere";
    CREMA_FAIL() << "cannot write " << path << ": running '" << dot_program << "' failed: " << std::strerror(spawned);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::string message;
  try {
    message = ReadFileToString(messages);
  } catch (const Error&) {
  }
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) message.pop_back();
  clean_up();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::remove(output.c_str());
    CREMA_FAIL() << "cannot write " << path << ": '" << dot_program << " " << format_flag << "' failed"
                 << (WIFEXITED(status) ? " with exit status " + std::to_string(WEXITSTATUS(status)) : "")
                 << (message.empty() ? "" : ": " + message);
  }
  std::error_code error;
  std::filesystem::rename(output, path, error);
  if (error) {
    std::remove(output.c_str());
    CREMA_FAIL() << "cannot write " << path << ": " << error.message();
  }
}

}  // namespace crema
