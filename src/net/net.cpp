#include "net/net.hpp"

#include <glog/logging.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "io/proto_io.hpp"
#include "layers/layer_registry.hpp"

namespace crema {

// ---------------------------------------------------------------------------------------------------------
// Passes over the NetParameter

bool Net::StateMeetsRule(const NetState& state, const NetStateRule& rule) {
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

NetParameter Net::FilterNet(const NetParameter& param) {
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

NetParameter Net::UpgradeInputs(const NetParameter& param) {
  if (param.input_size() == 0) return param;
  const bool by_shape = param.input_shape_size() > 0;
  const bool by_dim = param.input_dim_size() > 0;
  CREMA_CHECK(by_shape != by_dim) << "net '" << param.name() << "' declares inputs; give their shapes with "
                                  << "either input_shape or input_dim (4 per input), not both or neither";
  CREMA_CHECK(!by_shape || param.input_shape_size() == param.input_size() || param.input_shape_size() == 1)
      << "net '" << param.name() << "': " << param.input_size() << " input(s) but " << param.input_shape_size()
      << " input_shape(s)";
  CREMA_CHECK(!by_dim || param.input_dim_size() == 4 * param.input_size())
      << "net '" << param.name() << "': " << param.input_size() << " input(s) need "
      << 4 * param.input_size() << " input_dim values, got " << param.input_dim_size();
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

NetParameter Net::InsertSplits(const NetParameter& param) {
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
                                         << ") reads bottom blob '" << bottom
                                         << "', which no earlier layer produces";
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

// ---------------------------------------------------------------------------------------------------------
// Building

Net::Net(const NetParameter& param) { Build(param); }

Net::Net(const std::string& path, Phase phase, int level, const std::vector<std::string>& stages) {
  NetParameter param;
  ReadProtoFromTextFile(path, &param);
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->set_level(level);
  param.mutable_state()->clear_stage();
  for (const auto& stage : stages) param.mutable_state()->add_stage(stage);
  Build(param);
}

int Net::AddTop(const LayerParameter& layer_param, int top_index, std::vector<int>* step_tops,
                const std::vector<int>& step_bottoms) {
  const std::string name =
      top_index < layer_param.top_size() ? layer_param.top(top_index) : "(automatic top " + std::to_string(top_index) + ")";
  auto existing = blob_index_.find(name);
  if (existing != blob_index_.end() && top_index < layer_param.top_size()) {
    // Writing a blob that already exists is in-place execution, allowed only over this layer's own bottom.
    const int id = existing->second;
    CREMA_CHECK(top_index < static_cast<int>(step_bottoms.size()) && step_bottoms[top_index] == id)
        << "layer '" << layer_param.name() << "' (" << layer_param.type() << ") writes top blob '" << name
        << "', which an earlier layer already produced; in-place use needs the same name as bottom "
        << top_index << " of this layer";
    step_tops->push_back(id);
    return id;
  }
  const int id = static_cast<int>(blobs_.size());
  blobs_.push_back(std::make_shared<Blob>());
  blob_names_.push_back(name);
  blob_index_[name] = id;
  blob_loss_weights_.push_back(0.f);
  step_tops->push_back(id);
  return id;
}

void Net::Build(const NetParameter& in_param) {
  const NetParameter param = InsertSplits(UpgradeInputs(FilterNet(in_param)));
  // Layers the prototxt names; the Split layers InsertSplits adds are not among them.
  std::set<std::string> user_layers;
  for (const auto& layer : in_param.layer()) user_layers.insert(layer.name());
  name_ = param.name();
  phase_ = param.state().phase();
  force_backward_ = param.force_backward();
  LOG(INFO) << "Building net '" << name_ << "' for phase " << Phase_Name(phase_) << " (" << param.layer_size()
            << " layers)";
  for (int l = 0; l < param.layer_size(); ++l) {
    LayerParameter layer_param = param.layer(l);
    if (!layer_param.has_phase()) layer_param.set_phase(phase_);
    CREMA_CHECK(!layer_param.name().empty()) << "layer " << l << " (type '" << layer_param.type()
                                             << "') has no name; every layer needs a unique name";
    CREMA_CHECK(!layer_index_.count(layer_param.name()))
        << "two layers are named '" << layer_param.name() << "'; layer names must be unique";
    CREMA_CHECK(layer_param.propagate_down_size() == 0 ||
                layer_param.propagate_down_size() == layer_param.bottom_size())
        << "layer '" << layer_param.name() << "': propagate_down is given " << layer_param.propagate_down_size()
        << " time(s) but the layer has " << layer_param.bottom_size() << " bottom(s)";
    std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(layer_param);

    PlanStep step;
    step.layer = l;
    for (const auto& bottom : layer_param.bottom()) {
      auto found = blob_index_.find(bottom);
      CREMA_CHECK(found != blob_index_.end())
          << "layer '" << layer_param.name() << "' reads bottom blob '" << bottom << "', which no layer produces";
      step.bottoms.push_back(found->second);
    }
    int num_tops = layer_param.top_size();
    if (layer->AutoTopBlobs()) num_tops = std::max({num_tops, layer->MinTopBlobs(), layer->ExactNumTopBlobs()});
    for (int t = 0; t < num_tops; ++t) AddTop(layer_param, t, &step.tops, step.bottoms);
    for (size_t t = 0; t < step.tops.size(); ++t) {
      if (t < step.bottoms.size() && step.tops[t] == step.bottoms[t]) {
        CREMA_CHECK(layer->AllowsInPlace()) << "layer '" << layer_param.name() << "' (" << layer_param.type()
                                            << ") cannot run in place: give top '"
                                            << blob_names_[step.tops[t]] << "' a name of its own";
      }
    }

    std::vector<Blob*> bottoms, tops;
    for (int id : step.bottoms) bottoms.push_back(blobs_[id].get());
    for (int id : step.tops) tops.push_back(blobs_[id].get());
    try {
      layer->SetUp(bottoms, tops);
    } catch (const Error& error) {
      std::ostringstream shapes;
      for (size_t b = 0; b < bottoms.size(); ++b)
        shapes << (b ? ", " : "") << "'" << layer_param.bottom(b) << "' " << bottoms[b]->shape_string();
      const std::string message = error.what();
      // Layer errors already name the layer; add what it was given, which is where shape mistakes come from.
      CREMA_FAIL() << message
                   << (bottoms.empty() ? std::string() : " [bottom shapes: " + shapes.str() + "]");
    }
    for (size_t t = 0; t < step.tops.size(); ++t) {
      LOG(INFO) << "  " << layer_param.name() << " -> " << blob_names_[step.tops[t]] << ": "
                << tops[t]->shape_string();
      if (layer->loss(static_cast<int>(t)) != 0.f) blob_loss_weights_[step.tops[t]] = layer->loss(static_cast<int>(t));
    }
    layer_names_.push_back(layer_param.name());
    layer_index_[layer_param.name()] = l;
    inserted_split_.push_back(layer_param.type() == "Split" && !user_layers.count(layer_param.name()));
    if (layer_param.type() == "Input")
      for (Blob* top : tops) input_blobs_.push_back(top);
    layers_.push_back(std::move(layer));
    plan_.push_back(std::move(step));
  }

  // Outputs: blobs whose last written version no later step reads (in-place steps rewrite a blob).
  std::vector<int> last_write(blobs_.size(), -1), last_read(blobs_.size(), -1);
  for (size_t s = 0; s < plan_.size(); ++s) {
    for (int id : plan_[s].bottoms) last_read[id] = static_cast<int>(s);
    for (int id : plan_[s].tops) last_write[id] = static_cast<int>(s);
  }
  for (size_t id = 0; id < blobs_.size(); ++id) {
    const bool in_place_last = last_read[id] == last_write[id];  // read and rewritten by its last writer
    if (last_read[id] < last_write[id] || (in_place_last && last_write[id] >= 0)) {
      output_blobs_.push_back(blobs_[id].get());
      output_blob_indices_.push_back(static_cast<int>(id));
    }
  }

  CollectParams();
  DecideBackward();
  LOG(INFO) << "Net '" << name_ << "' built: " << layers_.size() << " layers, " << blobs_.size()
            << " blobs, " << learnable_params_.size() << " learnable parameter blobs; activations take "
            << activation_bytes() << " bytes";
}

void Net::CollectParams() {
  // Parameters named in ParamSpec are shared by every layer that uses the name; the first owns them.
  struct Owner {
    Blob* blob;
    std::string layer;
    int index;
  };
  std::map<std::string, Owner> owners;
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer* layer = layers_[l].get();
    const LayerParameter& lp = layer->layer_param();
    CREMA_CHECK(lp.param_size() <= static_cast<int>(layer->blobs().size()))
        << "layer '" << lp.name() << "' (" << lp.type() << ") has " << layer->blobs().size()
        << " parameter blob(s), but " << lp.param_size() << " param { } entries are given";
    for (size_t i = 0; i < layer->blobs().size(); ++i) {
      const ParamSpec spec = static_cast<int>(i) < lp.param_size() ? lp.param(static_cast<int>(i)) : ParamSpec();
      Blob* blob = layer->blobs()[i].get();
      layer->set_param_propagate_down(static_cast<int>(i), spec.lr_mult() != 0.f);
      if (!spec.name().empty() && owners.count(spec.name())) {
        const Owner& owner = owners[spec.name()];
        if (spec.share_mode() == ParamSpec::PERMISSIVE) {
          CREMA_CHECK(owner.blob->count() == blob->count())
              << "layer '" << lp.name() << "' shares parameter '" << spec.name() << "' with layer '" << owner.layer
              << "', but their sizes differ: " << blob->shape_string() << " vs " << owner.blob->shape_string();
        } else {
          CREMA_CHECK(owner.blob->shape() == blob->shape())
              << "layer '" << lp.name() << "' shares parameter '" << spec.name() << "' with layer '" << owner.layer
              << "', but their shapes differ: " << blob->shape_string() << " vs " << owner.blob->shape_string()
              << " (use share_mode: PERMISSIVE to share by count)";
        }
        const int owner_index = owner.index;
        CREMA_CHECK(!spec.has_lr_mult() || spec.lr_mult() == params_lr_[owner_index])
            << "layer '" << lp.name() << "' shares parameter '" << spec.name() << "' but sets lr_mult "
            << spec.lr_mult() << " where its owner '" << owner.layer << "' uses " << params_lr_[owner_index];
        CREMA_CHECK(!spec.has_decay_mult() || spec.decay_mult() == params_weight_decay_[owner_index])
            << "layer '" << lp.name() << "' shares parameter '" << spec.name() << "' but sets decay_mult "
            << spec.decay_mult() << " where its owner '" << owner.layer << "' uses "
            << params_weight_decay_[owner_index];
        blob->ShareData(*owner.blob);
        blob->ShareDiff(*owner.blob);
        continue;
      }
      const int index = static_cast<int>(learnable_params_.size());
      if (!spec.name().empty()) owners[spec.name()] = {blob, lp.name(), index};
      learnable_params_.push_back(blob);
      params_lr_.push_back(spec.lr_mult());
      params_weight_decay_.push_back(spec.decay_mult());
    }
  }
}

void Net::DecideBackward() {
  // Forward sweep: a blob needs a gradient when something upstream of it learns (or force_backward asks).
  std::vector<bool> blob_needs_gradient(blobs_.size(), false);
  for (auto& step : plan_) {
    Layer* layer = layers_[step.layer].get();
    const LayerParameter& lp = layer->layer_param();
    bool needs = false;
    for (size_t i = 0; i < layer->blobs().size(); ++i) needs = needs || layer->param_propagate_down(static_cast<int>(i));
    step.propagate_down.assign(step.bottoms.size(), false);
    for (size_t b = 0; b < step.bottoms.size(); ++b) {
      bool wanted = blob_needs_gradient[step.bottoms[b]] ||
                    (force_backward_ && layer->AllowForceBackward(static_cast<int>(b)));
      if (lp.propagate_down_size() > 0 && !lp.propagate_down(static_cast<int>(b))) wanted = false;
      step.propagate_down[b] = wanted;
      needs = needs || wanted;
    }
    step.needs_backward = needs;
    for (int id : step.tops) blob_needs_gradient[id] = blob_needs_gradient[id] || needs;
  }
  // Backward sweep: only steps that feed a loss run backward (unless force_backward).
  std::vector<bool> feeds_loss(blobs_.size(), false);
  for (size_t id = 0; id < blobs_.size(); ++id) feeds_loss[id] = blob_loss_weights_[id] != 0.f;
  for (auto it = plan_.rbegin(); it != plan_.rend(); ++it) {
    bool contributes = force_backward_;
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
  for (const auto& step : plan_)
    VLOG(1) << layer_names_[step.layer] << (step.needs_backward ? " needs backward" : " does not need backward");
}

// ---------------------------------------------------------------------------------------------------------
// Running

float Net::ForwardStep(size_t step) {
  const PlanStep& s = plan_[step];
  std::vector<Blob*> bottoms, tops;
  for (int id : s.bottoms) bottoms.push_back(blobs_[id].get());
  for (int id : s.tops) tops.push_back(blobs_[id].get());
  return layers_[s.layer]->Forward(bottoms, tops);
}

void Net::BackwardStep(size_t step) {
  const PlanStep& s = plan_[step];
  if (!s.needs_backward) return;
  std::vector<Blob*> bottoms, tops;
  for (int id : s.bottoms) bottoms.push_back(blobs_[id].get());
  for (int id : s.tops) tops.push_back(blobs_[id].get());
  layers_[s.layer]->Backward(tops, s.propagate_down, bottoms);
}

float Net::Forward() {
  float loss = 0.f;
  for (size_t step = 0; step < plan_.size(); ++step) loss += ForwardStep(step);
  return loss;
}

void Net::Backward() {
  for (size_t step = plan_.size(); step-- > 0;) BackwardStep(step);
}

void Net::ClearParamDiffs() {
  for (Blob* param : learnable_params_) param->set_diff(0.f);
}

std::string Net::DescribeFirstNonFinite() const {
  for (const auto& step : plan_) {
    for (int id : step.tops) {
      const Blob& blob = *blobs_[id];
      const float* data = blob.cpu_data();
      for (int i = 0; i < blob.count(); ++i) {
        if (!std::isfinite(data[i])) {
          std::ostringstream out;
          out << "layer '" << layer_names_[step.layer] << "' (" << layers_[step.layer]->type()
              << ") produced " << data[i] << " in top '" << blob_names_[id] << "' " << blob.shape_string()
              << " at element " << i;
          return out.str();
        }
      }
    }
  }
  return "";
}

size_t Net::activation_bytes() const {
  std::set<const SyncedMemory*> seen;
  size_t bytes = 0;
  for (const auto& blob : blobs_) {
    if (seen.insert(blob->data().get()).second) bytes += blob->data()->size();
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------------------
// Parameters in and out

Blob* Net::blob_by_name(const std::string& name) const {
  auto found = blob_index_.find(name);
  CREMA_CHECK(found != blob_index_.end()) << "net '" << name_ << "' has no blob named '" << name << "'";
  return blobs_[found->second].get();
}

Layer* Net::layer_by_name(const std::string& name) const {
  auto found = layer_index_.find(name);
  CREMA_CHECK(found != layer_index_.end()) << "net '" << name_ << "' has no layer named '" << name << "'";
  return layers_[found->second].get();
}

void Net::CopyTrainedLayersFrom(const NetParameter& trained) {
  int copied = 0, with_weights = 0;
  for (const auto& source : trained.layer()) {
    if (source.blobs_size() == 0) continue;
    ++with_weights;
    auto found = layer_index_.find(source.name());
    if (found == layer_index_.end()) {
      LOG(INFO) << "Ignoring source layer " << source.name() << " (not in net '" << name_ << "')";
      continue;
    }
    Layer* layer = layers_[found->second].get();
    auto& targets = layer->blobs();
    CREMA_CHECK(static_cast<int>(targets.size()) == source.blobs_size())
        << "cannot copy weights into layer '" << source.name() << "' (" << layer->type() << "): the weights file has "
        << source.blobs_size() << " parameter blob(s), the net has " << targets.size();
    for (int i = 0; i < source.blobs_size(); ++i) {
      const std::vector<int> stored = Blob::ShapeOf(source.blobs(i));
      const bool same = stored == targets[i]->shape();
      // Old files store 4-d legacy shapes (1 x 1 x N x K for inner products); accept equal counts there.
      int64_t stored_count = 1;
      for (int d : stored) stored_count *= d;
      const bool legacy_match = !source.blobs(i).has_shape() && stored_count == targets[i]->count();
      CREMA_CHECK(same || legacy_match)
          << "cannot copy weights into layer '" << source.name() << "' (" << layer->type() << "): parameter blob " << i
          << " has shape " << ShapeString(stored) << " in the weights file but " << targets[i]->shape_string()
          << " in the net";
      if (same) {
        targets[i]->FromProto(source.blobs(i), /*reshape=*/false);
      } else {
        const std::vector<int> shape = targets[i]->shape();
        targets[i]->FromProto(source.blobs(i), /*reshape=*/true);
        targets[i]->Reshape(shape);
      }
    }
    ++copied;
  }
  if (with_weights > 0 && copied == 0)
    LOG(WARNING) << "None of the " << with_weights << " layers with weights in '" << trained.name()
                 << "' matches a layer of net '" << name_ << "' by name: nothing was copied";
}

void Net::CopyTrainedLayersFrom(const std::string& path) {
  NetParameter trained;
  const bool text = path.size() > 9 && (path.rfind(".prototxt") == path.size() - 9 ||
                                        path.rfind(".txt") == path.size() - 4);
  if (text) {
    ReadProtoFromTextFile(path, &trained);
  } else {
    ReadProtoFromBinaryFile(path, &trained);
  }
  // Field 2 holds Caffe's legacy V1 layers, which crema does not read yet: say so rather than copy nothing.
  const auto& unknown = trained.GetReflection()->GetUnknownFields(trained);
  for (int i = 0; i < unknown.field_count(); ++i)
    CREMA_CHECK(unknown.field(i).number() != 2)
        << "weights file '" << path << "' stores its layers in Caffe's legacy V1 format (`layers`, not `layer`), "
        << "which crema cannot read yet; convert it with a current Caffe's upgrade_net_proto_binary";
  CopyTrainedLayersFrom(trained);
}

void Net::ShareTrainedLayersWith(const Net& other) {
  for (size_t l = 0; l < other.layers_.size(); ++l) {
    auto found = layer_index_.find(other.layer_names_[l]);
    if (found == layer_index_.end()) continue;
    auto& mine = layers_[found->second]->blobs();
    const auto& theirs = other.layers_[l]->blobs();
    CREMA_CHECK(mine.size() == theirs.size())
        << "layer '" << other.layer_names_[l] << "' has " << mine.size() << " parameter blob(s) in net '" << name_
        << "' but " << theirs.size() << " in net '" << other.name_ << "'";
    for (size_t i = 0; i < mine.size(); ++i) {
      CREMA_CHECK(mine[i]->shape() == theirs[i]->shape())
          << "layer '" << other.layer_names_[l] << "' parameter " << i << " has shape " << mine[i]->shape_string()
          << " in net '" << name_ << "' but " << theirs[i]->shape_string() << " in net '" << other.name_ << "'";
      mine[i]->ShareData(*theirs[i]);
    }
  }
}

void Net::ToProto(NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (inserted_split_[l]) continue;
    LayerParameter* layer = param->add_layer();
    layers_[l]->ToProto(layer, write_diff);
  }
}

void Net::SaveRuntimeState(const std::string& net_name, SolverState* state) const {
  for (const auto& layer : layers_) {
    if (!layer->HasRuntimeState()) continue;
    LayerRuntimeState* saved = state->add_layer_state();
    layer->SaveRuntimeState(saved);
    saved->set_net(net_name);
    saved->set_layer(layer->name());
  }
}

void Net::RestoreRuntimeState(const std::string& net_name, const SolverState& state) {
  for (const auto& saved : state.layer_state()) {
    if (saved.net() != net_name) continue;
    auto found = layer_index_.find(saved.layer());
    CREMA_CHECK(found != layer_index_.end()) << "the solver state holds runtime state for layer '" << saved.layer()
                                             << "' of the " << net_name << " net, which has no such layer";
    layers_[found->second]->RestoreRuntimeState(saved);
  }
}

}  // namespace crema
