#include "net/fuse.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/formula.hpp"
#include "layers/common/eltwise.hpp"
#include "layers/normalization/batch_norm.hpp"

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

std::string EltwiseFormula(const LayerParameter& layer, const std::vector<std::string>& operands) {
  if (layer.type() != "Eltwise" || operands.size() < 2) return "";
  const EltwiseParameter& p = layer.eltwise_param();
  std::string formula;
  switch (p.operation()) {
    case EltwiseParameter::SUM:
      if (p.coeff_size() != 0 && p.coeff_size() != static_cast<int>(operands.size())) return "";
      for (size_t i = 0; i < operands.size(); ++i) {
        const double coeff = p.coeff_size() == 0 ? 1.0 : p.coeff(static_cast<int>(i));
        formula += (i ? " + " : "") + (coeff == 1.0 ? operands[i] : Number(coeff) + " * " + operands[i]);
      }
      return "(" + formula + ")";
    case EltwiseParameter::PROD:
      for (size_t i = 0; i < operands.size(); ++i) formula += (i ? " * " : "") + operands[i];
      return "(" + formula + ")";
    case EltwiseParameter::MAX:
      // The gradient goes to the first of equal operands, as the layer's.
      formula = operands[0];
      for (size_t i = 1; i < operands.size(); ++i) formula = "max(" + formula + ", " + operands[i] + ")";
      return formula;
  }
  return "";
}

std::string ExpressionFormula(const LayerParameter& layer, const std::vector<std::string>& operands) {
  const ExpressionParameter& p = layer.expression_param();
  if (layer.type() != "Expression" || p.formula_size() != 1 || p.has_axes() || p.bottom_axes_size() > 0 ||
      static_cast<int>(operands.size()) != layer.bottom_size())
    return "";
  // Parsed over its bottoms' names, each varying over one axis: a formula with a reduction reduces it, and is left
  // alone (its axes are its bottoms' shapes').
  std::vector<std::string> names(p.bottom_name().begin(), p.bottom_name().end());
  if (names.empty()) names.assign(layer.bottom().begin(), layer.bottom().end());
  if (names.size() != operands.size()) return "";
  FormulaGraph graph(names, {"i"});
  int node = -1;
  try {
    node = graph.Parse(p.formula(0));
  } catch (const Error&) {
    return "";  // the layer says what is wrong when it is set up
  }
  const std::vector<bool> reached = graph.Reachable({node});
  for (size_t n = 0; n < reached.size(); ++n)
    if (reached[n] && (FormulaReduces(graph.nodes()[n].op) || graph.nodes()[n].op == FormulaOp::kCount)) return "";
  std::vector<std::string> substituted;
  for (const std::string& operand : operands) substituted.push_back("(" + operand + ")");
  return "(" + graph.Describe(node, substituted) + ")";
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
  // A run being built: the blobs it reads (named x, x1, x2, ... in its formula), and its formula.
  struct Run {
    std::vector<std::string> inputs, names;
    std::string formula;
    std::set<std::string> written;  // the blobs its layers write
  };
  // Layer l added to `run` (its first layer where run.formula is empty): false where it may not join. A layer joins
  // where it is an element layer or an Eltwise, has nothing a formula cannot say (a loss weight, parameters, ...), and
  // reads the run's value (but the first) and otherwise only blobs from before the run.
  const auto join = [&](int l, Run* run) {
    const LayerParameter& layer = param.layer(l);
    if (layer.bottom_size() < 1 || layer.top_size() != 1 || layer.loss_weight_size() > 0 || layer.param_size() > 0 ||
        layer.blobs_size() > 0 || layer.propagate_down_size() > 0 || layer.has_recompute())
      return false;
    const std::string value = run->formula.empty() ? "" : param.layer(l - 1).top(0);
    std::vector<std::string> operands;
    bool reads_value = false;
    for (const std::string& bottom : layer.bottom()) {
      if (!value.empty() && bottom == value) {
        operands.push_back(run->formula);
        reads_value = true;
        continue;
      }
      if (run->written.count(bottom)) return false;  // an earlier version, overwritten in the run
      const auto known = std::find(run->inputs.begin(), run->inputs.end(), bottom);
      if (known != run->inputs.end()) {
        operands.push_back(run->names[known - run->inputs.begin()]);
        continue;
      }
      run->inputs.push_back(bottom);
      run->names.push_back(run->names.empty() ? "x" : "x" + std::to_string(run->names.size()));
      operands.push_back(run->names.back());
    }
    if (!value.empty() && !reads_value) return false;
    const std::string formula = layer.type() == "Expression" ? ExpressionFormula(layer, operands)
                                : layer.bottom_size() == 1   ? ElementLayerFormula(layer, operands[0])
                                                             : EltwiseFormula(layer, operands);
    if (formula.empty() || formula.size() > kLongestFormula) return false;
    run->formula = formula;
    run->written.insert(layer.top(0));
    return true;
  };
  NetParameter result(param);
  result.clear_layer();
  int l = 0;
  while (l < param.layer_size()) {
    // The longest run from l: each next layer reads the top of the one before, its only reader.
    Run run;
    int end = l;
    if (join(l, &run)) {
      end = l + 1;
      while (end < param.layer_size() && readers[{end - 1, 0}] == 1) {
        Run longer = run;
        if (!join(end, &longer)) break;
        run = std::move(longer);
        ++end;
      }
    }
    const std::string output = end > l ? param.layer(end - 1).top(0) : "";
    const bool in_place_on_input = std::find(run.inputs.begin(), run.inputs.end(), output) != run.inputs.end();
    if (end - l < 2 || in_place_on_input) {
      *result.add_layer() = param.layer(l);
      ++l;
      continue;
    }
    // A formula the layer cannot read back (a constant folded to infinity) leaves the run as it is.
    bool readable = true;
    try {
      FormulaGraph(run.names).Parse(run.formula);
    } catch (const Error&) {
      readable = false;
    }
    if (!readable) {
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
    for (size_t i = 0; i < run.inputs.size(); ++i) {
      fused->add_bottom(run.inputs[i]);
      fused->mutable_expression_param()->add_bottom_name(run.names[i]);
    }
    fused->add_top(output);
    fused->mutable_expression_param()->add_formula(run.formula);
    l = end;
  }
  return result;
}

namespace {

// Whether step `step` runs layer type `type` in place on blob `id` alone.
bool InPlaceOn(const Net& net, size_t step, const char* type, int id) {
  if (step >= net.plan().size()) return false;
  const PlanStep& s = net.plan()[step];
  return std::string(net.layers()[s.layer]->type()) == type && s.bottoms == std::vector<int>{id} &&
         s.tops == std::vector<int>{id} && net.rewrite_of(s.layer) == s.layer;
}

// A ReLU step in place on blob `id` that the fusions may take: slope `most_slope` at most, not below 0, on the engine
// the net picks, and sending its gradient back.
bool FusableReLU(const Net& net, size_t step, int id, float most_slope) {
  if (!InPlaceOn(net, step, "ReLU", id)) return false;
  const PlanStep& s = net.plan()[step];
  const ReLUParameter& relu = net.layers()[s.layer]->layer_param().relu_param();
  return s.needs_backward && s.propagate_down[0] && relu.negative_slope() >= 0.f &&
         relu.negative_slope() <= most_slope && relu.engine() == ReLUParameter::DEFAULT;
}

// Step s runs the work of the `count` steps after it, which go: the rewrite's note, the layers it absorbs (and the
// gradients of their parameters, complete once it has run backward), and a reshape for its layer to set itself up.
void Absorb(Net* net, size_t s, size_t count) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  const int layer = plan[s].layer;
  std::string note = net->layer_names()[layer] + " (" + net->layers()[layer]->type() + "): runs ";
  std::vector<int> absorbed;
  for (size_t k = 1; k <= count; ++k) {
    const int taken = plan[s + k].layer;
    note += (k > 1 ? " and " : "") + net->layer_names()[taken] + " (" + net->layers()[taken]->type() + ")";
    absorbed.push_back(taken);
    net->TakeOverParams(layer, taken);
  }
  net->RecordTrainingRewrite(note + " in its own passes, for training");
  net->SetAbsorbed(layer, absorbed);
  plan[s].reshape_pending = true;
  for (size_t k = count; k > 0; --k) net->RemoveStep(s + k);
}

// Step s (a BatchNorm) runs the Scale and ReLU after it, where they are there to take: whether it did.
bool FuseBatchNorm(Net* net, size_t s) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  auto* norm = dynamic_cast<BatchNormLayer*>(net->layers()[plan[s].layer].get());
  if (norm == nullptr || norm->absorbs_affine() || plan[s].tops.size() != 1) return false;
  const Context& context = net->context();
  if ((context.device() != Device::kCPU || context.gpu_code_on_host()) && !norm->AbsorbsAffineInGpuCode()) return false;
  const int id = plan[s].tops[0];
  const Blob& top = *net->blobs()[id];
  const Blob& bottom = *net->blobs()[plan[s].bottoms[0]];
  if (top.layout() != bottom.layout() || top.num_axes() < 2) return false;
  // The Scale: a learned scale per channel (axis 1), in place on the BatchNorm's top, sending a gradient back.
  if (!InPlaceOn(*net, s + 1, "Scale", id) || !plan[s + 1].needs_backward || !plan[s + 1].propagate_down[0])
    return false;
  const Layer& scale = *net->layers()[plan[s + 1].layer];
  const ScaleParameter& sp = scale.layer_param().scale_param();
  if (sp.axis() != 1 || scale.params().empty() || scale.params()[0]->shape() != std::vector<int>{top.shape(1)})
    return false;
  const bool bias = sp.bias_term();
  // The ReLU of slope 0 (the fused loops compute max(0, z)).
  const bool relu = FusableReLU(*net, s + 2, id, 0.f);
  norm->AbsorbAffine(scale.params()[0], bias ? scale.params()[1] : nullptr, scale.param_propagate_down(0),
                     bias && scale.param_propagate_down(1), relu);
  Absorb(net, s, relu ? 2 : 1);
  return true;
}

// Step s (an Eltwise SUM over bottoms in the top's layout) runs the ReLU after it: whether it did.
bool FuseSum(Net* net, size_t s) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  auto* sum = dynamic_cast<EltwiseLayer*>(net->layers()[plan[s].layer].get());
  if (sum == nullptr || sum->absorbs_relu() || plan[s].tops.size() != 1 ||
      sum->layer_param().eltwise_param().operation() != EltwiseParameter::SUM)
    return false;
  const int id = plan[s].tops[0];
  for (int bottom : plan[s].bottoms)
    if (bottom == id || net->blobs()[bottom]->layout() != net->blobs()[id]->layout()) return false;
  if (!FusableReLU(*net, s + 1, id, std::numeric_limits<float>::max())) return false;
  sum->AbsorbReLU(net->layers()[plan[s + 1].layer]->layer_param().relu_param().negative_slope());
  Absorb(net, s, 1);
  return true;
}

// Step s (a Convolution, Deconvolution, InnerProduct or Pooling) runs the ReLU in place after it: whether it did.
bool FuseActivation(Net* net, size_t s) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  Layer& producer = *net->layers()[plan[s].layer];
  const std::string type = producer.type();
  if ((type != "Convolution" && type != "Deconvolution" && type != "InnerProduct" && type != "Pooling") ||
      plan[s].tops.size() != 1 || producer.fused_activation().kind != FusedActivation::kNone || producer.fused_sum())
    return false;
  const int id = plan[s].tops[0];
  if (!FusableReLU(*net, s + 1, id, std::numeric_limits<float>::max())) return false;
  const Layer& relu = *net->layers()[plan[s + 1].layer];
  const FusedActivation activation = relu.AsFusedActivation();
  // Only where the engine computes it in a pass of its own work: another engine would run it after its work, a pass
  // of its own, as the ReLU's step did.
  if (!producer.AppliesActivationInItsOwnPass(activation)) return false;
  producer.set_fused_activation_with_backward(activation);
  Absorb(net, s, 1);
  return true;
}

}  // namespace

void FuseForTraining(Net* net) {
  // Only a net meant to train: a solver's test nets run backward steps in their plans but are run forward only,
  // where the inference rewrites fold the BatchNorm and Scale into the convolution instead.
  if (!net->fold_allowed() || net->debug_info() || (net->phase() != TRAIN && !net->force_backward())) return;
  // GPU code (on a GPU, or rehearsed on the host) fuses the BatchNorm's and the sum's work by its rules
  // (BatchNormAffine, EltwiseForwardRule), and the ReLUs other engines apply in their own passes.
  for (size_t s = 0; s < net->plan().size(); ++s) {
    const PlanStep& step = net->plan()[s];
    if (!step.needs_backward || step.bottoms.empty() || net->rewrite_of(step.layer) != step.layer) continue;
    if (!FuseBatchNorm(net, s) && !FuseSum(net, s)) FuseActivation(net, s);
  }
}

}  // namespace crema
