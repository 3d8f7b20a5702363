#include "net/passes.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "layers/common/split.hpp"
#include "net/fold.hpp"
#include "net/fuse.hpp"
#include "net/upgrade.hpp"

namespace crema {

NetPasses NetPasses::Default() {
  NetPasses passes;
  // upgrade_legacy comes first: V1 nets carry their include/exclude rules in `layers`, which filter cannot read.
  passes.parameter = {{"upgrade_legacy", UpgradeLegacyNetPass},
                      {"filter", FilterNet},
                      {"upgrade_inputs", UpgradeInputs},
                      {"fuse_elements", FuseElementLayers},
                      {"insert_splits", InsertSplits}};
  passes.after_build = {
      {"decide_backward", DecideBackward}, {"plan_layouts", PlanLayouts}, {"fuse_for_training", FuseForTraining}};
  // The inference rewrites (net/fold.hpp), for a net that runs forward only.
  passes.after_weights = {{"plain_layouts", PlainLayoutsForRewrites}, {"fold_identities", FoldIdentities},
                          {"fold_into_producers", FoldIntoProducers}, {"drop_unused_blobs", DropUnusedBlobs},
                          {"plan_layouts", PlanLayoutsAfterRewrites}, {"plan_element_types", PlanElementTypes}};
  return passes;
}

bool StateMeetsRule(const NetState& state, const NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  const std::set<std::string> stages(state.stage().begin(), state.stage().end());
  for (const auto& stage : rule.stage())
    if (!stages.count(stage)) return false;
  for (const auto& stage : rule.not_stage())
    if (stages.count(stage)) return false;
  return true;
}

NetParameter FilterNet(const NetParameter& param) {
  NetParameter filtered(param);
  filtered.clear_layer();
  for (const auto& layer : param.layer()) {
    CREMA_CHECK(layer.include_size() == 0 || layer.exclude_size() == 0)
        << "layer '" << layer.name() << "' has both include and exclude rules; give one kind only";
    bool keep = layer.include_size() == 0;
    for (const auto& rule : layer.exclude())
      if (StateMeetsRule(param.state(), rule)) keep = false;
    for (const auto& rule : layer.include())
      if (StateMeetsRule(param.state(), rule)) keep = true;
    if (keep) *filtered.add_layer() = layer;
  }
  return filtered;
}

NetParameter UpgradeInputs(const NetParameter& param) {
  if (param.input_size() == 0) return param;
  const bool by_shape = param.input_shape_size() > 0;
  const bool by_dim = !by_shape && param.input_dim_size() > 0;
  const std::string net = "net '" + param.name() + "'";
  CREMA_CHECK(by_shape || by_dim) << net << " declares inputs; give their shapes with either input_shape or "
                                  << "input_dim (4 per input)";
  // As Caffe: input_shape wins over input_dim, and values beyond those the inputs need are left unread.
  if (by_shape && param.input_dim_size() > 0)
    LOG(WARNING) << net << ": both input_shape and input_dim are given; the " << param.input_dim_size()
                 << " input_dim value(s) are ignored and input_shape is used, as Caffe does";
  CREMA_CHECK(!by_shape || param.input_shape_size() >= param.input_size() || param.input_shape_size() == 1)
      << net << ": " << param.input_size() << " input(s) but " << param.input_shape_size() << " input_shape(s)";
  if (by_shape && param.input_shape_size() > param.input_size() && param.input_shape_size() > 1)
    LOG(WARNING) << net << ": " << param.input_size() << " input(s) but " << param.input_shape_size()
                 << " input_shape(s); the first " << param.input_size() << " are used and the other "
                 << param.input_shape_size() - param.input_size() << " ignored, as Caffe does";
  CREMA_CHECK(!by_dim || param.input_dim_size() >= 4 * param.input_size())
      << net << ": " << param.input_size() << " input(s) need " << 4 * param.input_size()
      << " input_dim values, got " << param.input_dim_size();
  if (by_dim && param.input_dim_size() > 4 * param.input_size())
    LOG(WARNING) << net << ": " << param.input_size() << " input(s) need " << 4 * param.input_size()
                 << " input_dim values, got " << param.input_dim_size() << "; the first " << 4 * param.input_size()
                 << " are used and the other " << param.input_dim_size() - 4 * param.input_size()
                 << " ignored, as Caffe does";
  NetParameter upgraded(param);
  upgraded.clear_input();
  upgraded.clear_input_shape();
  upgraded.clear_input_dim();
  upgraded.clear_layer();
  LayerParameter* input = upgraded.add_layer();
  input->set_name("input");
  input->set_type("Input");
  for (int i = 0; i < param.input_size(); ++i) {
    input->add_top(param.input(i));
    BlobShape* shape = input->mutable_input_param()->add_shape();
    if (by_shape) {
      *shape = param.input_shape(param.input_shape_size() == 1 ? 0 : i);
    } else {
      for (int d = 0; d < 4; ++d) shape->add_dim(param.input_dim(4 * i + d));
    }
  }
  for (const auto& layer : param.layer()) *upgraded.add_layer() = layer;
  return upgraded;
}

namespace {
std::string SplitLayerName(const std::string& blob, const std::string& layer, int top_index) {
  return blob + "_" + layer + "_" + std::to_string(top_index) + "_split";
}
std::string SplitTopName(const std::string& blob, const std::string& layer, int top_index, int copy) {
  return SplitLayerName(blob, layer, top_index) + "_" + std::to_string(copy);
}
}  // namespace

NetParameter InsertSplits(const NetParameter& param) {
  // Who produced the current version of each blob name, and how many layers read each version.
  using Producer = std::pair<int, int>;  // (layer index, top index)
  std::map<std::string, Producer> latest;
  std::map<Producer, int> readers;
  std::map<Producer, float> loss_weight;
  std::vector<std::vector<Producer>> bottom_producer(param.layer_size());
  for (int l = 0; l < param.layer_size(); ++l) {
    const LayerParameter& layer = param.layer(l);
    for (const auto& bottom : layer.bottom()) {
      auto found = latest.find(bottom);
      CREMA_CHECK(found != latest.end()) << "layer '" << layer.name() << "' (" << layer.type()
                                         << ") reads bottom blob '" << bottom << "', which no earlier layer produces";
      bottom_producer[l].push_back(found->second);
      ++readers[found->second];
    }
    for (int t = 0; t < layer.top_size(); ++t) {
      latest[layer.top(t)] = {l, t};
      if (t < layer.loss_weight_size() && layer.loss_weight(t) != 0) loss_weight[{l, t}] = layer.loss_weight(t);
    }
  }
  // A blob read by several layers, or read once while also counted in the loss, gets a Split layer.
  auto copies = [&](const Producer& p) {
    int n = readers.count(p) ? readers[p] : 0;
    if (loss_weight.count(p) && n > 0) ++n;
    return n;
  };
  NetParameter result(param);
  result.clear_layer();
  std::map<Producer, int> next_copy;
  for (int l = 0; l < param.layer_size(); ++l) {
    LayerParameter* layer = result.add_layer();
    *layer = param.layer(l);
    for (int b = 0; b < layer->bottom_size(); ++b) {
      const Producer& p = bottom_producer[l][b];
      if (copies(p) <= 1) continue;
      // An Expression layer's formulas name its bottoms as the prototxt does: it keeps those names.
      if (layer->type() == "Expression" && layer->expression_param().bottom_name_size() == 0)
        for (const std::string& name : param.layer(l).bottom())
          layer->mutable_expression_param()->add_bottom_name(name);
      const std::string& producer_name = param.layer(p.first).name();
      const std::string blob = param.layer(p.first).top(p.second);
      layer->set_bottom(b, SplitTopName(blob, producer_name, p.second, next_copy[p]++));
    }
    for (int t = 0; t < layer->top_size(); ++t) {
      const Producer p{l, t};
      const int n = copies(p);
      if (n <= 1) continue;
      LayerParameter* split = result.add_layer();
      split->set_name(SplitLayerName(layer->top(t), layer->name(), t));
      split->set_type("Split");
      split->add_bottom(layer->top(t));
      for (int c = 0; c < n; ++c) split->add_top(SplitTopName(layer->top(t), layer->name(), t, c));
      if (loss_weight.count(p)) {
        // The loss now comes from the split's first copy; the producer's own top no longer counts.
        split->add_loss_weight(loss_weight[p]);
        for (int c = 1; c < n; ++c) split->add_loss_weight(0);
        layer->set_loss_weight(t, 0);
        next_copy[p] = 1;
      }
    }
  }
  return result;
}

void DecideBackward(Net* net) {
  std::vector<PlanStep>& plan = net->mutable_plan();
  const size_t num_blobs = net->blobs().size();
  // Forward sweep: a blob needs a gradient when something upstream of it learns (or force_backward asks).
  std::vector<bool> blob_needs_gradient(num_blobs, false);
  for (auto& step : plan) {
    Layer* layer = net->layers()[step.layer].get();
    const LayerParameter& lp = layer->layer_param();
    bool needs = false;
    for (size_t i = 0; i < layer->params().size(); ++i)
      needs = needs || layer->param_propagate_down(static_cast<int>(i));
    step.propagate_down.assign(step.bottoms.size(), false);
    for (size_t b = 0; b < step.bottoms.size(); ++b) {
      bool wanted = blob_needs_gradient[step.bottoms[b]] ||
                    (net->force_backward() && layer->AllowForceBackward(static_cast<int>(b)));
      if (lp.propagate_down_size() > 0 && !lp.propagate_down(static_cast<int>(b))) wanted = false;
      step.propagate_down[b] = wanted;
      needs = needs || wanted;
    }
    step.needs_backward = needs;
    for (int id : step.tops) blob_needs_gradient[id] = blob_needs_gradient[id] || needs;
  }
  // Backward sweep: only steps that feed a loss run backward (unless force_backward).
  std::vector<bool> feeds_loss(num_blobs, false);
  for (size_t id = 0; id < num_blobs; ++id) feeds_loss[id] = net->blob_loss_weight(static_cast<int>(id)) != 0.f;
  for (auto it = plan.rbegin(); it != plan.rend(); ++it) {
    bool contributes = net->force_backward();
    for (int id : it->tops) contributes = contributes || feeds_loss[id];
    if (!contributes) {
      it->needs_backward = false;
      std::fill(it->propagate_down.begin(), it->propagate_down.end(), false);
      continue;
    }
    // Gradient reaches a bottom only where this step propagates down to it (propagate_down: false cuts
    // everything above that bottom off from the loss).
    for (size_t b = 0; b < it->bottoms.size(); ++b)
      if (it->propagate_down[b]) feeds_loss[it->bottoms[b]] = true;
  }
  for (const auto& step : plan)
    VLOG(1) << net->layer_names()[step.layer] << (step.needs_backward ? " needs backward" : " does not need backward");
}

namespace {

// For plan_layouts: whether every step after `writer` that reads this version of blob `id` takes `layout` (reads
// its data and writes its gradient in it), every step that rewrites it in place keeps it, and, where a reader
// makes a top that views the blob's memory (a Split) or writes a top in the blob's layout without reordering
// (Layer::PassesLayoutThrough), that top's readers take it too. Collects the readers and those following tops.
struct LayoutCheck {
  const Net& net;
  const std::set<int>& outputs;

  // The layouts of `step`'s bottoms, blob `id` (if given) taken as `layout`.
  std::vector<Layout> BottomLayouts(const PlanStep& step, int id = -1, Layout layout = Layout::kPlain) const {
    std::vector<Layout> layouts;
    for (int bottom : step.bottoms) layouts.push_back(bottom == id ? layout : net.blobs()[bottom]->layout());
    return layouts;
  }

  bool EveryReaderTakes(size_t writer, int id, Layout layout, std::vector<size_t>* readers,
                        std::vector<int>* following) const {
    const std::vector<PlanStep>& plan = net.plan();
    for (size_t r = writer + 1; r < plan.size(); ++r) {
      const PlanStep& later = plan[r];
      const Layer& reader = *net.layers()[later.layer];
      for (size_t b = 0; b < later.bottoms.size(); ++b) {
        if (later.bottoms[b] != id) continue;
        readers->push_back(r);
        if (!reader.ReadsLayout(static_cast<int>(b), layout)) return false;
        const bool in_place = b < later.tops.size() && later.tops[b] == id;
        if (in_place && reader.OffersLayout(static_cast<int>(b), BottomLayouts(later, id, layout)) != layout)
          return false;
        // Tops that must follow the blob into the layout: views of it (a Split's), and the tops of a layer
        // that writes them in its bottom's layout (ReLU out of place).
        std::vector<int> followers;
        for (const Layer::TopView& view : later.views)
          if (view.bottom == static_cast<int>(b)) followers.push_back(view.top);
        if (!in_place && reader.PassesLayoutThrough())
          for (size_t t = 0; t < later.tops.size(); ++t) followers.push_back(static_cast<int>(t));
        for (int t : followers) {
          const int top = later.tops[t];
          if (outputs.count(top) || reader.OffersLayout(t, BottomLayouts(later, id, layout)) != layout) return false;
          following->push_back(top);
          if (!EveryReaderTakes(r, top, layout, readers, following)) return false;
        }
      }
      for (size_t w = 0; w < later.tops.size(); ++w)
        if (later.tops[w] == id && (w >= later.bottoms.size() || later.bottoms[w] != id)) return true;  // a new version
    }
    return true;
  }
};

}  // namespace

void PlanLayouts(Net* net) {
  const char* choice = std::getenv("CREMA_LAYOUTS");
  if (choice != nullptr && std::strcmp(choice, "plain") == 0) return;
  std::vector<PlanStep>& plan = net->mutable_plan();
  const auto& blobs = net->blobs();
  const std::set<int> outputs(net->output_blob_indices().begin(), net->output_blob_indices().end());
  const LayoutCheck check{*net, outputs};
  for (size_t s = 0; s < plan.size(); ++s) {
    const Layer& writer = *net->layers()[plan[s].layer];
    for (size_t t = 0; t < plan[s].tops.size(); ++t) {
      const int id = plan[s].tops[t];
      // In place, the blob keeps the layout its first writer gave it (checked there, for every later step); a
      // following top (a Split's view, an out-of-place ReLU's top) got its bottom's with it.
      if (t < plan[s].bottoms.size() && plan[s].bottoms[t] == id) continue;
      if (blobs[id]->layout() != Layout::kPlain) continue;
      const Layout offered = writer.OffersLayout(static_cast<int>(t), check.BottomLayouts(plan[s]));
      if (offered == Layout::kPlain || outputs.count(id)) continue;
      std::vector<size_t> readers;
      std::vector<int> following;
      if (!check.EveryReaderTakes(s, id, offered, &readers, &following) || readers.empty()) continue;
      blobs[id]->set_layout(offered);
      for (int top : following) blobs[top]->set_layout(offered);
      plan[s].reshape_pending = true;
      std::ostringstream names;
      for (size_t r : readers) {
        plan[r].reshape_pending = true;
        names << (names.tellp() > 0 ? ", " : "") << net->layer_names()[plan[r].layer];
      }
      LOG(INFO) << "  '" << net->blob_names()[id] << "' stays in " << LayoutName(offered) << " from "
                << net->layer_names()[plan[s].layer] << " to " << names.str();
    }
  }
  net->Reshape();  // the layers whose blobs changed layout build their primitives anew
}

namespace {

// For plan_element_types: blobs joined by steps that pass values through (PassesValues) take one element type
// together, a group.
struct QuantizationGroups {
  std::vector<int> parent;
  explicit QuantizationGroups(size_t blobs) : parent(blobs) {
    for (size_t i = 0; i < blobs; ++i) parent[i] = static_cast<int>(i);
  }
  int Find(int id) {
    while (parent[id] != id) id = parent[id] = parent[parent[id]];
    return id;
  }
  void Join(int a, int b) { parent[Find(a)] = Find(b); }
};

// Whether a step's tops hold its bottoms' values as they are, in whatever type they lie: its layer passes 8-bit or
// bf16 values through (Layer::PassesQuantizationThrough: a MAX pooling, a Concat), or every top is a view of a bottom
// (a Split's copies, which share its memory).
bool PassesValues(const PlanStep& step, const Layer& layer) {
  return layer.PassesQuantizationThrough() || (!step.views.empty() && step.views.size() == step.tops.size());
}

// What the readers of a blob agree on: the quantization every reader applies where all apply the same one, else, where
// only readers that take any type read it (Layer::ReadsAnyQuantization), the one they offer where they offer one alike.
class ReadersAgreement {
 public:
  // `layer` reads the blob as its bottom `b`.
  void Add(const Layer& layer, int b) {
    const Quantization q = layer.ReadsQuantized(b);
    if (layer.ReadsAnyQuantization(b)) {
      if (!q.floats()) offers_differ_ |= offered_ && q != offer_;
      offer_ = q.floats() ? offer_ : q;
      offered_ |= !q.floats();
      return;
    }
    agree_ &= !q.floats() && (!read_ || q == common_);
    common_ = q;
    read_ = true;
  }
  Quantization Result() const {
    if (read_) return agree_ ? common_ : Quantization{};
    return offered_ && !offers_differ_ ? offer_ : Quantization{};
  }

 private:
  Quantization common_, offer_;
  bool read_ = false, agree_ = true, offered_ = false, offers_differ_ = false;
};

// How blob `id` is held in 8 bits (or bf16), or, in floats, what the steps that read it agree on (ReadersAgreement).
Quantization ReadQuantization(const Net& net, int id) {
  if (!net.blobs()[id]->quantization().floats()) return net.blobs()[id]->quantization();
  ReadersAgreement readers;
  for (const PlanStep& step : net.plan()) {
    const Layer& layer = *net.layers()[step.layer];
    for (size_t b = 0; b < step.bottoms.size(); ++b)
      if (step.bottoms[b] == id) readers.Add(layer, static_cast<int>(b));
  }
  return readers.Result();
}

// What the group of blobs `members` may hold: what the steps outside the group that read one of them agree on
// (ReadersAgreement), read out of place and through no view, where every member is written once, out of place, by a
// step that can write it in that type (8 bits over a fused sum's summand held in 8 bits or quantized by its readers,
// planned before; or bf16) or passes values through within the group (floats otherwise, or where no step outside the
// group reads them).
// Collects the steps that read or write them, and the writing steps with a fused sum with their summand's quantization.
Quantization GroupQuantization(const Net& net, const std::vector<int>& members, const std::set<int>& outputs,
                               std::set<size_t>* steps, std::vector<std::pair<size_t, Quantization>>* summands) {
  const std::vector<PlanStep>& plan = net.plan();
  ReadersAgreement readers;
  summands->clear();
  for (int id : members) {
    if (outputs.count(id) || net.BlobReadOutside(id) || !net.blobs()[id]->quantization().floats()) return {};
    int writers = 0;
    for (size_t s = 0; s < plan.size(); ++s) {
      const PlanStep& step = plan[s];
      const Layer& layer = *net.layers()[step.layer];
      for (size_t t = 0; t < step.tops.size(); ++t) {
        if (step.tops[t] != id) continue;
        ++writers;
        steps->insert(s);
        if (std::find(step.bottoms.begin(), step.bottoms.end(), id) != step.bottoms.end()) return {};  // in place
        if (layer.fused_sum()) summands->push_back({s, ReadQuantization(net, step.bottoms.back())});
      }
      for (size_t b = 0; b < step.bottoms.size(); ++b) {
        if (step.bottoms[b] != id) continue;
        steps->insert(s);
        const bool passes = PassesValues(step, layer);
        for (const Layer::TopView& view : step.views)
          if (view.bottom == static_cast<int>(b) && !passes) return {};
        if (!passes) readers.Add(layer, static_cast<int>(b));  // else its tops are members
      }
    }
    if (writers != 1) return {};
  }
  // A writer with a fused sum writes integers over a summand held in 8 bits, or in floats quantized alike by its
  // readers (where no one quantizes a float summand its range is not known); the sum adds it in its own type.
  for (const auto& [step, q] : *summands)
    if (!q.integers()) return {};
  // Every writer (but a step passing values through) writes the type the readers agree on.
  const Quantization agreed = readers.Result();
  for (size_t s : *steps) {
    const PlanStep& step = plan[s];
    const Layer& layer = *net.layers()[step.layer];
    for (size_t t = 0; t < step.tops.size() && !agreed.floats() && !PassesValues(step, layer); ++t)
      if (std::find(members.begin(), members.end(), step.tops[t]) != members.end() &&
          !layer.WritesQuantized(static_cast<int>(t), agreed.type))
        return {};
  }
  return agreed;
}

// The only step before step `end` that writes blob `id`, out of place, and which of its tops it is; -1 where none or
// several do, or one writes it in place.
int SoleWriterBefore(const Net& net, int id, size_t end, int* top) {
  int writer = -1;
  for (size_t s = 0; s < end; ++s) {
    const PlanStep& step = net.plan()[s];
    for (size_t t = 0; t < step.tops.size(); ++t) {
      if (step.tops[t] != id) continue;
      if (writer >= 0 || std::find(step.bottoms.begin(), step.bottoms.end(), id) != step.bottoms.end()) return -1;
      writer = static_cast<int>(s);
      *top = static_cast<int>(t);
    }
  }
  return writer;
}

// The step that writes blob `id` and reads its gradient in bf16 (Layer::ReadsTopDiffInBfloat16): the only step before
// step `end` that writes it, out of place, running backward; -1 where there is none.
int Bfloat16GradientReader(const Net& net, int id, size_t end) {
  int top = -1;
  const int writer = SoleWriterBefore(net, id, end, &top);
  if (writer < 0) return -1;
  const PlanStep& step = net.plan()[writer];
  return step.needs_backward && net.layers()[step.layer]->ReadsTopDiffInBfloat16(top, step.propagate_down) ? writer
                                                                                                           : -1;
}

// Whether blob `id`'s gradient may lie in bf16: its writer reads the gradient so (Bfloat16GradientReader); exactly one
// step writes the gradient (propagates down to the blob), after the writer, out of place, and can write it so
// (Layer::WritesBottomDiffInBfloat16); no view shares its gradient, no loss seeds its gradient, nothing outside the
// plan reads it.
bool GradientInBfloat16(const Net& net, int id) {
  const std::vector<PlanStep>& plan = net.plan();
  if (net.BlobReadOutside(id) || net.blob_loss_weight(id) != 0.f || net.blobs()[id]->count() == 0) return false;
  const int writer = Bfloat16GradientReader(net, id, plan.size());
  if (writer < 0) return false;
  int propagating = 0;
  for (size_t r = 0; r < plan.size(); ++r) {
    const PlanStep& step = plan[r];
    for (const Layer::TopView& view : step.views)  // one sharing the gradient (a Split's copies share only data)
      if (view.diff && (step.tops[view.top] == id || step.bottoms[view.bottom] == id)) return false;
    for (size_t b = 0; b < step.bottoms.size(); ++b) {
      if (step.bottoms[b] != id || !step.propagate_down[b]) continue;
      if (++propagating > 1 || static_cast<int>(r) < writer ||
          std::find(step.tops.begin(), step.tops.end(), id) != step.tops.end() ||
          !net.layers()[step.layer]->WritesBottomDiffInBfloat16(static_cast<int>(b)))
        return false;
    }
  }
  return propagating == 1;
}

// Whether blob `id`, which step `end` reads in place as its `layer`'s bottom `bottom` (in the type q of its
// ReadsQuantized), could lie in that type before it: q is not floats, one step before `end` writes the blob, out of
// place (SoleWriterBefore), and can write it so, and every step between that reads it reads it so, passing no view of
// it.
bool InputWriterWrites(const Net& net, int id, size_t end, const Layer& layer, int bottom) {
  const Quantization q = layer.ReadsQuantized(bottom);
  if (q.floats()) return false;
  int top = -1;
  const int writer = SoleWriterBefore(net, id, end, &top);
  if (writer < 0) return false;
  const std::vector<PlanStep>& plan = net.plan();
  ReadersAgreement readers;
  readers.Add(layer, bottom);
  for (size_t r = writer + 1; r < end; ++r) {
    const PlanStep& step = plan[r];
    for (size_t b = 0; b < step.bottoms.size(); ++b) {
      if (step.bottoms[b] != id) continue;
      readers.Add(*net.layers()[step.layer], static_cast<int>(b));
      for (const Layer::TopView& view : step.views)
        if (view.bottom == static_cast<int>(b)) return false;
    }
  }
  return readers.Result() == q && net.layers()[plan[writer].layer]->WritesQuantized(top, q.type);
}

// A step in place on a blob gets a top of its own (Net::UntieInPlaceTop), where its layer may leave its place
// (Layer::MayLeavePlace: a ResNet's BatchNorm with its Scale and ReLU fused, in place on a convolution's output), for
// either of the types below to be planned: where every later step reading the blob reads it in one type other than
// floats, none of them writing it again, and the layer would write it in that type out of place (the next
// convolution's input in bf16); or where the layer reads the blob in a type other than floats, and the one step that
// wrote it before, out of place, can write it in that type for the steps between that read it in that type too (a
// BatchNorm reading its convolution's output in 16 bits, its own output in floats for the residual sum); or where the
// blob's writer reads its gradient in bf16 and the layer would write that gradient in bf16 out of place (the
// convolution's output gradient). Returns whether one did.
bool UntieInPlaceWriters(Net* net) {
  const std::vector<PlanStep>& plan = net->plan();
  bool untied = false;
  for (size_t s = 0; s < plan.size(); ++s) {
    const Layer& layer = *net->layers()[plan[s].layer];
    for (size_t t = 0; t < plan[s].tops.size(); ++t) {
      const int id = plan[s].tops[t];
      if (!layer.MayLeavePlace(static_cast<int>(t)) || net->BlobReadOutside(id) ||
          std::find(plan[s].bottoms.begin(), plan[s].bottoms.end(), id) == plan[s].bottoms.end())
        continue;
      ReadersAgreement readers;
      bool rewritten = false, viewed = false;
      for (size_t r = s + 1; r < plan.size() && !rewritten; ++r) {
        for (size_t b = 0; b < plan[r].bottoms.size(); ++b) {
          if (plan[r].bottoms[b] != id) continue;
          readers.Add(*net->layers()[plan[r].layer], static_cast<int>(b));
          for (const Layer::TopView& view : plan[r].views) viewed |= view.bottom == static_cast<int>(b);
        }
        rewritten = std::find(plan[r].tops.begin(), plan[r].tops.end(), id) != plan[r].tops.end();
      }
      const Quantization q = readers.Result();
      const bool data = !rewritten && !viewed && !q.floats() && layer.WritesQuantized(static_cast<int>(t), q.type);
      const int b =
          static_cast<int>(std::find(plan[s].bottoms.begin(), plan[s].bottoms.end(), id) - plan[s].bottoms.begin());
      const bool input = !data && InputWriterWrites(*net, id, s, layer, b);
      const bool gradient =
          plan[s].propagate_down[b] && layer.WritesBottomDiffInBfloat16(b) && Bfloat16GradientReader(*net, id, s) >= 0;
      if (!data && !input && !gradient) continue;
      const int own = net->UntieInPlaceTop(s, static_cast<int>(t));
      LOG(INFO) << "  " << net->layer_names()[plan[s].layer] << " leaves its place on '" << net->blob_names()[id]
                << "' for a top of its own, '" << net->blob_names()[own] << "'";
      untied = true;
    }
  }
  return untied;
}

// The Splits' bf16 rule (SplitLayer::RoundCopyGradients), decided in every run, blobs in floats or not: a copy whose
// one reader propagates down to it and could write that gradient in bf16.
void DecideSplitRounding(Net* net) {
  const std::vector<PlanStep>& plan = net->plan();
  for (const PlanStep& step : plan) {
    auto* split = dynamic_cast<SplitLayer*>(net->layers()[step.layer].get());
    if (split == nullptr) continue;
    std::vector<bool> rounded(step.tops.size(), false);
    for (size_t t = 0; t < step.tops.size(); ++t) {
      int readers = 0;
      bool writes_bf16 = false;
      for (const PlanStep& reader : plan)
        for (size_t b = 0; b < reader.bottoms.size(); ++b) {
          if (reader.bottoms[b] != step.tops[t]) continue;
          ++readers;
          writes_bf16 =
              reader.propagate_down[b] && net->layers()[reader.layer]->WritesBottomDiffInBfloat16(static_cast<int>(b));
        }
      rounded[t] = readers == 1 && writes_bf16;
    }
    split->RoundCopyGradients(rounded);
  }
}

}  // namespace

void PlanElementTypes(Net* net) {
  DecideSplitRounding(net);
  const char* choice = std::getenv("CREMA_ELEMENT_TYPES");
  // debug_info reads every blob as floats.
  if ((choice != nullptr && std::strcmp(choice, "float") == 0) || net->debug_info()) return;
  bool changed = UntieInPlaceWriters(net);
  std::vector<PlanStep>& plan = net->mutable_plan();
  const auto& blobs = net->blobs();
  const std::set<int> outputs(net->output_blob_indices().begin(), net->output_blob_indices().end());
  QuantizationGroups groups(blobs.size());
  for (const PlanStep& step : plan) {
    if (!PassesValues(step, *net->layers()[step.layer])) continue;
    for (int bottom : step.bottoms)
      for (int top : step.tops) groups.Join(bottom, top);
  }
  std::map<int, std::vector<int>> members;  // by group, in the order of the blobs' first writes
  std::vector<int> order;
  for (const PlanStep& step : plan)
    for (int id : step.tops) {
      std::vector<int>& group = members[groups.Find(id)];
      if (group.empty()) order.push_back(groups.Find(id));
      if (std::find(group.begin(), group.end(), id) == group.end()) group.push_back(id);
    }
  for (int root : order) {
    std::vector<int>& group = members[root];
    // A member no step writes (a net input joined by a Concat) leaves the group in floats.
    for (const PlanStep& step : plan)
      for (int id : step.bottoms)
        if (groups.Find(id) == root && std::find(group.begin(), group.end(), id) == group.end()) group.push_back(id);
    std::set<size_t> steps;
    std::vector<std::pair<size_t, Quantization>> summands;
    const Quantization q = GroupQuantization(*net, group, outputs, &steps, &summands);
    if (q.floats()) continue;
    for (const auto& [s, summand] : summands) net->layers()[plan[s].layer]->set_float_summand_quantization(summand);
    std::ostringstream names, blob_names;
    for (int id : group) {
      blobs[id]->set_quantization(q);
      blob_names << (blob_names.tellp() > 0 ? "', '" : "") << net->blob_names()[id];
    }
    for (size_t s : steps) {
      plan[s].reshape_pending = true;
      names << (names.tellp() > 0 ? ", " : "") << net->layer_names()[plan[s].layer];
    }
    std::ostringstream scale;
    if (q.integers()) scale << " (scale " << q.scale << ")";
    LOG(INFO) << "  '" << blob_names.str() << "' pass" << (group.size() == 1 ? "es" : "") << " as "
              << ElementTypeName(q.type) << scale.str() << " between " << names.str();
    changed = true;
  }
  // Gradients in bf16: from the step that writes one (a fused BatchNorm's backward) to the step that reads it (the
  // convolution whose output it is).
  for (size_t id = 0; id < blobs.size(); ++id) {
    if (blobs[id]->diff_type() != ElementType::kFloat32 || !GradientInBfloat16(*net, static_cast<int>(id))) continue;
    blobs[id]->set_diff_type(ElementType::kBfloat16);
    std::ostringstream names;
    for (PlanStep& step : plan)
      if (std::find(step.bottoms.begin(), step.bottoms.end(), static_cast<int>(id)) != step.bottoms.end() ||
          std::find(step.tops.begin(), step.tops.end(), static_cast<int>(id)) != step.tops.end()) {
        step.reshape_pending = true;
        names << (names.tellp() > 0 ? ", " : "") << net->layer_names()[step.layer];
      }
    LOG(INFO) << "  the gradient of '" << net->blob_names()[id] << "' passes as "
              << ElementTypeName(ElementType::kBfloat16) << " between " << names.str();
    changed = true;
  }
  if (changed) net->Reshape();  // the writers and readers make their primitives for the types planned
}

}  // namespace crema
