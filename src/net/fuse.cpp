#include "net/fuse.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

namespace crema {

namespace {

// A float as the formula's parser reads it back exactly.
std::string Number(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return std::string("(") + text + ")";
}

// shift + scale * x, leaving out what is neutral.
std::string Affine(double shift, double scale, const std::string& x) {
  std::string result = scale == 1.0 ? x : Number(scale) + " * " + x;
  if (shift != 0.0) result = Number(shift) + " + " + result;
  return "(" + result + ")";
}

// The longest formula the pass builds: layers whose formula repeats its input (a leaky ReLU, ELU, Swish) double it.
constexpr size_t kLongestFormula = 4096;

}  // namespace

std::string ElementLayerFormula(const LayerParameter& layer, const std::string& x) {
  const std::string& type = layer.type();
  if (type == "ReLU") {
    if (layer.relu_param().engine() != ReLUParameter::DEFAULT) return "";
    const double slope = layer.relu_param().negative_slope();
    // Caffe's gradient at 0 is the slope's: min(x, 0) hands it to x there.
    return slope == 0.0 ? "relu(" + x + ")" : "(relu(" + x + ") + " + Number(slope) + " * min(" + x + ", 0))";
  }
  if (type == "Sigmoid") return layer.sigmoid_param().engine() == SigmoidParameter::DEFAULT ? "sigmoid(" + x + ")" : "";
  if (type == "TanH") return layer.tanh_param().engine() == TanHParameter::DEFAULT ? "tanh(" + x + ")" : "";
  if (type == "AbsVal") return "abs(" + x + ")";
  if (type == "BNLL") return "softplus(" + x + ")";
  if (type == "Power") {
    const PowerParameter& p = layer.power_param();
    const std::string base = Affine(p.shift(), p.scale(), x);
    return p.power() == 1.f ? base : "(" + base + " ^ " + Number(p.power()) + ")";
  }
  if (type == "Exp" || type == "Log") {
    const bool exp = type == "Exp";
    const double base = exp ? layer.exp_param().base() : layer.log_param().base();
    const double scale = exp ? layer.exp_param().scale() : layer.log_param().scale();
    const double shift = exp ? layer.exp_param().shift() : layer.log_param().shift();
    if (base != -1.0 && !(base > 0.0)) return "";  // the layer refuses it; let it say so
    const double log_base = base == -1.0 ? 1.0 : std::log(base);
    const std::string inner = Affine(shift, scale, x);
    if (exp) return log_base == 1.0 ? "exp(" + inner + ")" : "exp(" + inner + " * " + Number(log_base) + ")";
    return log_base == 1.0 ? "log(" + inner + ")" : "(log(" + inner + ") * " + Number(1.0 / log_base) + ")";
  }
  if (type == "ELU") {
    // Caffe's gradient at 0 is alpha: exp(min(x, 0)) gives it.
    return "(relu(" + x + ") + " + Number(layer.elu_param().alpha()) + " * (exp(min(" + x + ", 0)) - 1))";
  }
  if (type == "Swish") return "(" + x + " * sigmoid(" + Number(layer.swish_param().beta()) + " * " + x + "))";
  if (type == "Clip") {
    const ClipParameter& p = layer.clip_param();
    if (!p.has_min() || !p.has_max()) return "";
    return "min(max(" + x + ", " + Number(p.min()) + "), " + Number(p.max()) + ")";
  }
  return "";
}

NetParameter FuseElementLayers(const NetParameter& param) {
  if (!param.fuse_elements()) return param;
  // Readers of each version of each blob name: a version is (layer, top index); a bottom reads the latest version.
  using Version = std::pair<int, int>;
  std::map<std::string, Version> latest;
  std::map<Version, int> readers;
  for (int l = 0; l < param.layer_size(); ++l) {
    const LayerParameter& layer = param.layer(l);
    for (const std::string& bottom : layer.bottom()) {
      const auto found = latest.find(bottom);
      if (found != latest.end()) ++readers[found->second];
    }
    for (int t = 0; t < layer.top_size(); ++t) latest[layer.top(t)] = {l, t};
  }
  // A layer the pass may take into a run: fusable on its own.
  const auto fusable = [&](int l, const std::string& x) {
    const LayerParameter& layer = param.layer(l);
    if (layer.bottom_size() != 1 || layer.top_size() != 1 || layer.loss_weight_size() > 0 || layer.param_size() > 0 ||
        layer.blobs_size() > 0 || layer.propagate_down_size() > 0 || layer.has_recompute())
      return std::string();
    return ElementLayerFormula(layer, x);
  };
  NetParameter result(param);
  result.clear_layer();
  int l = 0;
  while (l < param.layer_size()) {
    // The longest run from l: each next layer reads the top of the one before, its only reader.
    std::string formula = fusable(l, "x");
    int end = l + 1;
    while (!formula.empty() && end < param.layer_size()) {
      const LayerParameter& previous = param.layer(end - 1);
      const LayerParameter& next = param.layer(end);
      if (next.bottom_size() != 1 || next.bottom(0) != previous.top(0) || readers[{end - 1, 0}] != 1) break;
      const std::string extended = fusable(end, formula);
      if (extended.empty() || extended.size() > kLongestFormula) break;
      formula = extended;
      ++end;
    }
    const std::string& input = param.layer(l).bottom_size() == 1 ? param.layer(l).bottom(0) : "";
    const std::string& output = param.layer(end - 1).top_size() == 1 ? param.layer(end - 1).top(0) : "";
    if (formula.empty() || end - l < 2 || input == output) {
      *result.add_layer() = param.layer(l);
      ++l;
      continue;
    }
    LayerParameter* fused = result.add_layer();
    std::string name;
    for (int k = l; k < end; ++k) name += (k > l ? "+" : "") + param.layer(k).name();
    fused->set_name(name);
    fused->set_type("Expression");
    if (param.layer(l).has_phase()) fused->set_phase(param.layer(l).phase());
    fused->add_bottom(input);
    fused->add_top(output);
    fused->mutable_expression_param()->add_formula(formula);
    fused->mutable_expression_param()->add_bottom_name("x");
    l = end;
  }
  return result;
}

}  // namespace crema
