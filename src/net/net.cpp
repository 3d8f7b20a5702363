#include "net/net.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>
#include <sstream>

#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "layers/layer_registry.hpp"
#include "net/lifetimes.hpp"
#include "net/memory_plan.hpp"
#include "net/passes.hpp"
#include "net/step_graph.hpp"
#include "net/upgrade.hpp"

namespace crema {

namespace {

// A blob's data as floats on the host: its own, or, in another element type (bf16), converted into `converted` in
// the plain order (a float blob's values stay in the order they lie).
const float* DataAsFloats(const Blob& blob, std::vector<float>* converted) {
  if (blob.quantization().floats()) return blob.cpu_data();
  *converted = PlainValues(blob);
  return converted->data();
}

// A blob's gradient as floats on the host: its own, or, in bf16, converted into `converted` (in the order it lies).
const float* DiffAsFloats(const Blob& blob, std::vector<float>* converted) {
  if (blob.diff_type() == ElementType::kFloat32) return blob.cpu_diff();
  const auto* bits = static_cast<const uint16_t*>(blob.cpu_diff_bytes());
  converted->resize(static_cast<size_t>(blob.count()));
  for (size_t i = 0; i < converted->size(); ++i) (*converted)[i] = FromBfloat16(bits[i]);
  return converted->data();
}

// Errors raised below a layer (a filler, a blob's size, the allocator, a database) cannot know which layer they
// serve; the layers' own errors start by naming it ("layer 'NAME' (TYPE): ...").
std::string NamingLayer(const std::string& message, const std::string& name, const std::string& type) {
  if (message.rfind("layer '", 0) == 0) return message;
  return "layer '" + name + "' (" + type + "): " + message;
}

// "a, b, c" (at most `shown` names, then how many more).
std::string NameList(const std::vector<std::string>& names, size_t shown = 10) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < shown; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > shown) list += " and " + std::to_string(names.size() - shown) + " more";
  return list;
}

}  // namespace

bool BlobSignature::Matches(const Blob& blob) const {
  return shape == blob.shape() && data_memory == blob.data().get() && data_offset == blob.data_offset() &&
         diff_memory == blob.diff().get() && diff_offset == blob.diff_offset();
}

BlobSignature BlobSignature::Of(const Blob& blob) {
  return BlobSignature{blob.shape(), blob.data().get(), blob.data_offset(), blob.diff().get(), blob.diff_offset()};
}

Net::Net(const NetParameter& param, std::shared_ptr<Context> context, const NetPasses& passes)
    : context_(context ? std::move(context) : std::make_shared<Context>()) {
  Build(param, passes);
}

Net::~Net() = default;

Net::Net(const std::string& path, Phase phase, int level, const std::vector<std::string>& stages,
         std::shared_ptr<Context> context)
    : context_(context ? std::move(context) : std::make_shared<Context>()), origin_(path) {
  NetParameter param = ReadNetDefinition(path);
  // Here rather than in the pass, so that the notices name the file.
  UpgradeLegacyNetAndLog(&param, path);
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->set_level(level);
  param.mutable_state()->clear_stage();
  for (const auto& stage : stages) param.mutable_state()->add_stage(stage);
  Build(param, NetPasses::Default());
}

int Net::AddTop(const LayerParameter& layer_param, int top_index, std::vector<int>* step_tops,
                const std::vector<int>& step_bottoms) {
  const std::string name = top_index < layer_param.top_size() ? layer_param.top(top_index)
                                                              : "(automatic top " + std::to_string(top_index) + ")";
  for (int earlier = 0; earlier < top_index && top_index < layer_param.top_size(); ++earlier)
    CREMA_CHECK(layer_param.top(earlier) != name)
        << "layer '" << layer_param.name() << "' (" << layer_param.type() << ") lists top '" << name
        << "' twice (tops " << earlier << " and " << top_index << "); every top needs a name of its own";
  auto existing = blob_index_.find(name);
  if (existing != blob_index_.end() && top_index < layer_param.top_size()) {
    // Writing a blob that already exists is in-place execution, allowed only over this layer's own bottom.
    const int id = existing->second;
    CREMA_CHECK(top_index < static_cast<int>(step_bottoms.size()) && step_bottoms[top_index] == id)
        << "layer '" << layer_param.name() << "' (" << layer_param.type() << ") writes top blob '" << name
        << "', which an earlier layer already produced; in-place use needs the same name as bottom " << top_index
        << " of this layer";
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

std::vector<Blob*> Net::Blobs(const std::vector<int>& ids) const {
  std::vector<Blob*> result;
  for (int id : ids) result.push_back(blobs_[id].get());
  return result;
}

void Net::Build(const NetParameter& in_param, const NetPasses& passes) {
  NetParameter param = in_param;
  for (const ParameterPass& pass : passes.parameter) {
    param = pass.run(param);
    passes_run_.push_back(pass.name);
  }
  // Layers the prototxt names (in today's form or a legacy one); those a pass added (Split layers, say) are not
  // among them.
  std::set<std::string> user_layers;
  for (const auto& layer : in_param.layer()) user_layers.insert(layer.name());
  for (const auto& legacy : in_param.layers())
    user_layers.insert(legacy.has_layer() ? legacy.layer().name() : legacy.name());
  name_ = param.name();
  phase_ = param.state().phase();
  force_backward_ = param.force_backward();
  fold_ = param.fold();
  // A net without layers would "run" and report a loss of 0: always a wrong file or wrong include rules.
  if (param.layer_size() == 0) {
    const std::string net = (name_.empty() ? std::string("the net") : "net '" + name_ + "'") +
                            (origin_.empty() ? std::string() : " of '" + origin_ + "'");
    const int declared = in_param.layer_size() + in_param.layers_size();
    CREMA_CHECK(declared == 0) << net << " has no layers in phase " << Phase_Name(phase_) << ": the include/exclude "
                               << "rules of all " << declared << " of its layers leave them out (level "
                               << param.state().level() << ", stages: "
                               << (param.state().stage_size() ? NameList({param.state().stage().begin(),
                                                                          param.state().stage().end()})
                                                              : std::string("none"))
                               << ")";
    CREMA_FAIL() << net << " has no layers";
  }
  // NetParameter.debug_info: log every pass and check every step for non-finite values, for the net's life.
  debug_info_ = param.debug_info();
  check_finite_ = param.debug_info();
  workspace_ = std::make_shared<Blob>(std::vector<int>{0});
  LOG(INFO) << "Building net '" << name_ << "' for phase " << Phase_Name(phase_) << " on the "
            << DeviceName(context_->device()) << " (" << param.layer_size() << " layers)";
  for (int l = 0; l < param.layer_size(); ++l) {
    LayerParameter layer_param = param.layer(l);
    if (!layer_param.has_phase()) layer_param.set_phase(phase_);
    CREMA_CHECK(layer_param.propagate_down_size() == 0 ||
                layer_param.propagate_down_size() == layer_param.bottom_size())
        << "layer '" << layer_param.name() << "': propagate_down is given " << layer_param.propagate_down_size()
        << " time(s) but the layer has " << layer_param.bottom_size() << " bottom(s)";

    PlanStep step;
    step.layer = l;
    std::vector<std::vector<int>> bottom_shapes;
    for (const auto& bottom : layer_param.bottom()) {
      auto found = blob_index_.find(bottom);
      CREMA_CHECK(found != blob_index_.end())
          << "layer '" << layer_param.name() << "' reads bottom blob '" << bottom << "', which no layer produces";
      step.bottoms.push_back(found->second);
      bottom_shapes.push_back(blobs_[found->second]->shape());
    }
    std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(layer_param, bottom_shapes, context_);
    int num_tops = layer_param.top_size();
    if (layer->AutoTopBlobs()) num_tops = std::max({num_tops, layer->MinTopBlobs(), layer->ExactNumTopBlobs()});
    for (int t = 0; t < num_tops; ++t) AddTop(layer_param, t, &step.tops, step.bottoms);
    for (size_t t = 0; t < step.tops.size(); ++t) {
      if (t < step.bottoms.size() && step.tops[t] == step.bottoms[t]) {
        CREMA_CHECK(layer->AllowsInPlace())
            << "layer '" << layer_param.name() << "' (" << layer_param.type() << ") cannot run in place: give top '"
            << blob_names_[step.tops[t]] << "' a name of its own";
      }
    }

    // The copies a Split the passes added hands out are the user's blob under another name.
    if (layer_param.type() == "Split" && !user_layers.count(layer_param.name()) && layer_param.bottom_size() == 1)
      for (const auto& top : layer_param.top()) split_sources_[top] = layer_param.bottom(0);
    const std::vector<Blob*> bottoms = Blobs(step.bottoms), tops = Blobs(step.tops);
    try {
      try {
        layer->SetUp(bottoms, tops);
      } catch (const std::bad_alloc&) {
        CREMA_FAIL() << "out of host memory setting the layer up";
      }
    } catch (const Error& error) {
      // Add what the layer was given, which is where shape mistakes come from.
      CREMA_FAIL() << NamingLayer(error.what(), layer_param.name(), layer_param.type()) << BottomShapesNote(step.bottoms);
    }
    // The plan records what the layer declared: views of bottoms, and internal blobs beside the tops.
    step.views = layer->TopViews(static_cast<int>(tops.size()));
    RegisterInternalBlobs(*layer, &step);
    for (Blob* bottom : bottoms) step.reshaped_for.push_back(BlobSignature::Of(*bottom));
    layer->set_workspace(workspace_);
    if (layer->workspace_floats() > static_cast<size_t>(workspace_->count()))
      workspace_->Reshape({static_cast<int>(layer->workspace_floats())});
    for (size_t t = 0; t < step.tops.size(); ++t)
      LOG(INFO) << "  " << layer_param.name() << " [" << layer->engine() << "] -> " << blob_names_[step.tops[t]] << ": "
                << tops[t]->shape_string();
    layer_names_.push_back(layer_param.name());
    IndexLayerName(l, *layer);
    added_by_pass_.push_back(!user_layers.count(layer_param.name()));
    rewrite_of_.push_back(l);
    absorbed_.emplace_back();
    derived_of_layer_.push_back(-1);
    layers_.push_back(std::move(layer));
    plan_.push_back(std::move(step));
  }

  CollectParams();
  DeriveStepTables();
  for (const NetPass& pass : passes.after_build) {
    pass.run(this);
    passes_run_.push_back(pass.name);
    DeriveStepTables();
  }
  after_weights_ = passes.after_weights;
  LOG(INFO) << "Net '" << name_ << "' built: " << layers_.size() << " layers, " << blobs_.size() << " blobs, "
            << learnable_params_.size() << " learnable parameter blobs; the workspace takes " << workspace_bytes()
            << " bytes";
  LogPrecisions();

  // The memory plan: for forward and backward wherever a step runs backward (a TEST net may be run backward, as
  // in Caffe); whoever only runs the net forward plans it again for that (PlanMemory(false)).
  plan_with_backward_ =
      std::any_of(plan_.begin(), plan_.end(), [](const PlanStep& step) { return step.needs_backward; });
  lanes_requested_ = param.lanes();
  CREMA_CHECK(lanes_requested_ >= 0) << "net '" << name_ << "': lanes: " << lanes_requested_
                                     << " is not a number of lanes (0: automatic, 1: in order, N: up to N at once)";
  ChooseLanes(context_->lanes() > 0 ? context_->lanes() : lanes_requested_);
  const std::string refusal = MemoryPlanRefusal(*this);
  recompute_ = param.memory_plan() == NetParameter::RECOMPUTE || context_->recompute();
  memory_budget_ = static_cast<size_t>(param.memory_budget());
  const char* off = param.memory_plan() == NetParameter::NONE ? "the net says memory_plan: NONE"
                    : !context_->plan_memory()                ? "plans are turned off (--memory_plan=none)"
                    : debug_info_                             ? "debug_info keeps every blob readable"
                    : !refusal.empty()                        ? refusal.c_str()
                                                              : nullptr;
  if (off != nullptr) {
    const NetLifetimes lifetimes = ComputeLifetimes(*this, plan_with_backward_);
    LOG(INFO) << "Net '" << name_ << "': no memory plan (" << off << "); activations"
              << (plan_with_backward_ ? " and gradients" : "") << " take " << lifetimes.total_bytes
              << " bytes, at most " << lifetimes.peak_live_bytes << " of them live at once";
    return;
  }
  plan_memory_ = true;
  BindMemoryPlan();
}

// ---------------------------------------------------------------------------------------------------------
// The memory plan

void Net::RegisterInternalBlobs(const Layer& layer, PlanStep* step) {
  for (size_t i = 0; i < layer.internal_blobs().size(); ++i) {
    step->internals.push_back(static_cast<int>(blobs_.size()));
    blobs_.push_back(layer.internal_blobs()[i]);
    blob_names_.push_back(layer.internal_blob_names()[i]);
    blob_index_[blob_names_.back()] = step->internals.back();
    blob_loss_weights_.push_back(0.f);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rewriting the plan

bool Net::BlobReadOutside(int id) const {
  return !plan_memory_ || kept_blobs_.count(id) > 0 ||
         std::find(output_blob_indices_.begin(), output_blob_indices_.end(), id) != output_blob_indices_.end();
}

int Net::ReplaceStepLayer(size_t step, LayerParameter param, const std::vector<int>& tops,
                          const std::function<void(Layer&)>& prepare) {
  PlanStep& s = plan_[step];
  const int replaced = rewrite_of_[s.layer];
  param.clear_blobs();
  std::vector<std::vector<int>> bottom_shapes;
  for (int id : s.bottoms) bottom_shapes.push_back(blobs_[id]->shape());
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, bottom_shapes, context_);
  if (prepare) prepare(*layer);
  s.tops = tops;
  s.internals.clear();
  try {
    layer->SetUp(Blobs(s.bottoms), Blobs(s.tops));
  } catch (const Error& error) {
    CREMA_FAIL() << NamingLayer(error.what(), param.name(), param.type()) << " (rewritten for inference)"
                 << BottomShapesNote(s.bottoms);
  }
  s.views = layer->TopViews(static_cast<int>(s.tops.size()));
  RegisterInternalBlobs(*layer, &s);
  s.reshaped_for.clear();
  for (int id : s.bottoms) s.reshaped_for.push_back(BlobSignature::Of(*blobs_[id]));
  s.propagate_down.assign(s.bottoms.size(), false);
  s.needs_backward = false;
  layer->set_backward_planned(layers_backward_planned_);
  layer->set_workspace(workspace_);
  if (layer->workspace_floats() > static_cast<size_t>(workspace_->count()))
    workspace_->Reshape({static_cast<int>(layer->workspace_floats())});
  const int index = static_cast<int>(layers_.size());
  layers_.push_back(std::move(layer));
  layer_names_.push_back(layer_names_[replaced]);
  added_by_pass_.push_back(true);
  rewrite_of_.push_back(replaced);
  absorbed_.emplace_back();
  derived_of_layer_.push_back(-1);
  layer_learnable_params_.push_back({});
  if (!layer_workspaces_.empty()) layer_workspaces_.push_back(nullptr);
  s.layer = index;
  return index;
}

void Net::AddDerivedParams(int layer, std::vector<const Blob*> sources, std::function<void()> derive) {
  DerivedParams derived{std::move(sources), {}, std::move(derive)};
  derived_of_layer_[layer] = static_cast<int>(derived_.size());
  derived_.push_back(std::move(derived));
  RefreshDerivedParams(layer);
}

void Net::RefreshDerivedParams(int layer) {
  DerivedParams& derived = derived_[derived_of_layer_[layer]];
  bool changed = derived.versions.size() != derived.sources.size();
  for (size_t i = 0; i < derived.sources.size() && !changed; ++i)
    changed = derived.sources[i]->data_version() != derived.versions[i];
  if (!changed) return;
  derived.derive();
  derived.versions.clear();
  for (const Blob* source : derived.sources) derived.versions.push_back(source->data_version());
}

void Net::TakeOverParams(int layer, int from) {
  std::vector<int>& params = layer_learnable_params_[layer];
  for (int param : layer_learnable_params_[from])
    if (std::find(params.begin(), params.end(), param) == params.end()) params.push_back(param);
}

void Net::RemoveStep(size_t step) { plan_.erase(plan_.begin() + static_cast<std::ptrdiff_t>(step)); }

void Net::RedirectReads(size_t step, int from, int to) {
  for (size_t s = step + 1; s < plan_.size(); ++s)
    for (int& bottom : plan_[s].bottoms)
      if (bottom == from) bottom = to;
}

int Net::UntieInPlaceTop(size_t step, int top) {
  PlanStep& s = plan_[step];
  const int old_id = s.tops[top];
  CREMA_CHECK(std::find(s.bottoms.begin(), s.bottoms.end(), old_id) != s.bottoms.end() && !BlobReadOutside(old_id) &&
              layers_[s.layer]->MayLeavePlace(top))
      << "step " << layer_names_[s.layer] << " cannot leave its place on '" << blob_names_[old_id] << "'";
  const Blob& old_blob = *blobs_[old_id];
  auto blob = std::make_shared<Blob>(old_blob.shape());
  blob->set_layout(old_blob.layout());
  const int id = static_cast<int>(blobs_.size());
  blobs_.push_back(std::move(blob));
  blob_names_.push_back(blob_names_[old_id] + "@" + layer_names_[s.layer]);
  blob_index_[blob_names_.back()] = id;
  split_sources_[blob_names_.back()] = blob_names_[old_id];  // errors name the user's blob
  blob_loss_weights_.push_back(0.f);
  s.tops[top] = id;
  s.reshape_pending = true;
  for (size_t later = step + 1; later < plan_.size(); ++later)
    for (std::vector<int>* ids : {&plan_[later].bottoms, &plan_[later].tops})
      for (int& used : *ids)
        if (used == old_id) {
          used = id;
          plan_[later].reshape_pending = true;
        }
  return id;
}

int Net::DropBlobsNoStepUses() {
  std::vector<bool> used(blobs_.size(), false);
  for (const PlanStep& step : plan_)
    for (const std::vector<int>* ids : {&step.bottoms, &step.tops, &step.internals})
      for (int id : *ids) used[id] = true;  // the net's inputs too: they are the tops of its Input steps
  int dropped = 0;
  for (size_t id = 0; id < blobs_.size(); ++id) {
    if (used[id] || BlobReadOutside(static_cast<int>(id))) continue;
    blobs_[id] = std::make_shared<Blob>(blobs_[id]->shape());
    ++dropped;
  }
  return dropped;
}

void Net::TellLayersBackwardPlanned(bool planned) {
  if (layers_backward_planned_ == planned) return;
  layers_backward_planned_ = planned;
  for (const auto& layer : layers_) layer->set_backward_planned(planned);
  for (PlanStep& step : plan_) step.reshape_pending = true;
}

int Net::ShareKeptInputs(bool share) {
  int borrowers = 0;
  for (size_t s = 0; s < plan_.size(); ++s) {
    const PlanStep& step = plan_[s];
    Layer& layer = *layers_[step.layer];
    if (!share) {
      layer.BorrowKeptInput(nullptr, "");
      continue;
    }
    if (!step.needs_backward || step.bottoms.empty() || step.tops.empty() || step.bottoms[0] != step.tops[0]) continue;
    // The step that last wrote the input before this one: its kept values are the input's, and it runs backward
    // after this step does, so they live until this step's backward has read them.
    for (size_t w = s; w-- > 0;) {
      const PlanStep& writer = plan_[w];
      const auto top = std::find(writer.tops.begin(), writer.tops.end(), step.bottoms[0]);
      if (top == writer.tops.end()) continue;
      const Layer& source = *layers_[writer.layer];
      const Blob* kept = writer.needs_backward ? source.KeptTop(static_cast<int>(top - writer.tops.begin())) : nullptr;
      std::string name;
      for (size_t k = 0; k < source.internal_blobs().size(); ++k)
        if (source.internal_blobs()[k].get() == kept) name = source.internal_blob_names()[k];
      if (kept != nullptr && !name.empty() && layer.BorrowKeptInput(kept, name)) ++borrowers;
      break;
    }
  }
  return borrowers;
}

void Net::BindMemoryPlan() {
  InvalidateLanes();
  // Layers drop what they would save only for a backward pass that will not run, and every step takes the shapes
  // and storage it has now, before the buffers are planned.
  TellLayersBackwardPlanned(plan_with_backward_);
  ReshapeSteps(/*every=*/false);
  // What the net takes without a plan (as memory_plan: NONE runs it), before the plan shares kept values.
  const size_t unplanned_bytes = ComputeLifetimes(*this, plan_with_backward_).total_bytes;
  if (plan_with_backward_) ShareKeptInputs(true);
  MemoryPlan plan = ChoosePlan();
  plan.unplanned_bytes = unplanned_bytes + plan.unplanned_workspace_bytes;
  // The storages the plan moves stay alive until every view of them has moved too, so that a view nobody
  // re-made shows up below (and no new storage takes an old one's address meanwhile).
  std::vector<std::shared_ptr<SyncedMemory>> moved;
  arena_ = std::make_shared<SyncedMemory>(plan.arena_bytes);
  for (const PlannedBuffer& buffer : plan.buffers) {
    Blob& owner = *blobs_[buffer.owner];
    moved.push_back(buffer.gradient ? owner.diff() : owner.data());
    if (buffer.gradient) {
      owner.ViewDiff(arena_, buffer.offset / sizeof(float));
    } else {
      owner.ViewData(arena_, buffer.offset / sizeof(float), owner.shape());
    }
  }
  // Each step's workspace becomes a view of its slot; the shared workspace, which no layer then needs, goes.
  workspace_ = std::make_shared<Blob>(std::vector<int>{0});
  for (const auto& layer : layers_) layer->set_workspace(workspace_);
  layer_workspaces_.assign(layers_.size(), nullptr);
  for (const PlannedWorkspace& slot : plan.workspaces) {
    auto view = std::make_shared<Blob>();
    view->ViewData(arena_, slot.offset / sizeof(float), {static_cast<int>(slot.bytes / sizeof(float))});
    const int layer = plan_[slot.step].layer;
    layers_[layer]->set_workspace(view);
    layer_workspaces_[layer] = std::move(view);
  }
  memory_plan_ = std::make_unique<MemoryPlan>(std::move(plan));
  schedule_ = memory_plan_->schedule;
  ReshapeSteps(/*every=*/true);
  // Every moved buffer must still be its slot of the arena, and no blob may still view moved memory.
  std::set<const SyncedMemory*> old;
  for (const auto& memory : moved) old.insert(memory.get());
  std::string astray;
  for (size_t id = 0; id < blobs_.size() && astray.empty(); ++id)
    if (old.count(blobs_[id]->data().get()) || old.count(blobs_[id]->diff().get()))
      astray = "blob '" + blob_names_[id] + "' still views memory the memory plan moved";
  for (const PlannedBuffer& buffer : memory_plan_->buffers) {
    const Blob& owner = *blobs_[buffer.owner];
    if (!astray.empty() || (buffer.gradient ? owner.diff() : owner.data()) == arena_) continue;
    astray = "blob '" + blob_names_[buffer.owner] + "' lost its slot of the arena when its step was reshaped";
  }
  if (!astray.empty()) {
    LOG(WARNING) << "Net '" << name_ << "': " << astray << "; the net runs without a plan";
    ReleaseMemoryPlan(false, true);
    plan_memory_ = false;
    return;
  }
  planned_input_shapes_.clear();
  for (const Blob* input : input_blobs_) planned_input_shapes_.push_back(input->shape());
  reused_in_forward_.assign(blobs_.size(), false);
  for (const PlannedBuffer& buffer : memory_plan_->buffers)
    if (!buffer.gradient && buffer.reused_in_forward)
      for (int id : buffer.blob_ids) reused_in_forward_[id] = true;
  const MemoryPlan& p = *memory_plan_;
  LOG(INFO) << "Net '" << name_ << "': memory plan for " << (p.with_backward ? "forward and backward" : "forward only")
            << ": " << p.planned_bytes() << " bytes (an arena of " << p.arena_bytes << " for " << p.buffers.size()
            << " buffers, " << p.in_place << " of them in place, and " << p.workspaces.size() << " workspaces, and "
            << p.kept_bytes << " kept apart) instead of " << p.unplanned_bytes << " ("
            << std::lround(100.0 * p.planned_bytes() / std::max<size_t>(p.unplanned_bytes, 1)) << "%)"
            << (p.schedule.replays > 0
                    ? "; backward runs " + std::to_string(p.schedule.replays) + " of " + std::to_string(plan_.size()) +
                          " steps' forward again, in " + std::to_string(p.schedule.segments.size()) + " segments"
                    : std::string());
  if (memory_budget_ > 0 && p.with_backward && p.planned_bytes() > memory_budget_)
    LOG(WARNING) << "Net '" << name_ << "': memory_budget " << memory_budget_ << " bytes is below the smallest plan ("
                 << p.planned_bytes() << " bytes" << (recompute_ ? ", recomputing" : "")
                 << "); the net uses the smallest";
}

MemoryPlan Net::ChoosePlan() {
  MemoryPlanOptions options{plan_with_backward_, kept_blobs_, PassSchedule()};
  if (plan_with_backward_ && !chosen_segments_.empty()) {
    options.schedule = RecomputeSchedule(*this, chosen_segments_, RecomputableSteps(*this, recompute_));
    return ComputeMemoryPlan(*this, options);
  }
  // With lanes, a plan that keeps independent steps independent. A recompute plan is made for running in order (it
  // is there to save bytes); lanes then run at once what its bytes allow.
  if (!plan_with_backward_ || !(recompute_ || LayerMarkedRecompute(*this))) {
    options.concurrent = lanes() > 1;
    return ComputeMemoryPlan(*this, options);
  }
  RecomputeOptions recompute;
  recompute.recomputable = RecomputableSteps(*this, recompute_);
  recompute.budget_bytes = memory_budget_;
  return ComputeRecomputePlan(*this, options, recompute);
}

PassSchedule Net::schedule() const {
  return schedule_.replays > 0 ? schedule_ : PlainSchedule(*this, plan_with_backward_);
}

void Net::ReleaseMemoryPlan(bool keep_values, bool reshape) {
  if (!memory_plan_) return;
  InvalidateLanes();
  const Device device = context_->device();
  for (const PlannedBuffer& buffer : memory_plan_->buffers) {
    Blob& owner = *blobs_[buffer.owner];
    if ((buffer.gradient ? owner.diff() : owner.data()) != arena_) continue;  // not (or no longer) in the arena
    if (!buffer.gradient && !owner.quantization().floats()) {  // 8-bit or bf16 data: on the host (oneDNN's engines)
      const void* bytes = keep_values ? owner.cpu_bytes() : nullptr;
      owner.OwnStorage(false);
      if (bytes != nullptr) std::memcpy(owner.mutable_cpu_bytes(), bytes, owner.data_floats() * sizeof(float));
      continue;
    }
    if (buffer.gradient && owner.diff_type() != ElementType::kFloat32) {  // a bf16 gradient: on the host too
      const void* bytes = keep_values ? owner.cpu_diff_bytes() : nullptr;
      owner.OwnStorage(true);
      if (bytes != nullptr) std::memcpy(owner.mutable_cpu_diff_bytes(), bytes, owner.diff_floats() * sizeof(float));
      continue;
    }
    const float* values = keep_values ? (buffer.gradient ? owner.diff_on(device) : owner.data_on(device)) : nullptr;
    owner.OwnStorage(buffer.gradient);
    if (values != nullptr)
      copy(*context_, owner.count(), values,
           buffer.gradient ? owner.mutable_diff_on(device) : owner.mutable_data_on(device));
  }
  memory_plan_.reset();
  if (!keep_values) schedule_ = PassSchedule();  // a pass under way goes on replaying as it began
  // Every layer shares one workspace again (the reshapes below, or BindMemoryPlan's, size it to the largest request).
  layer_workspaces_.clear();
  for (const auto& layer : layers_) layer->set_workspace(workspace_);
  // Layers copy their inputs again (from the reshapes below); in the middle of a pass they go on reading the kept
  // values they borrowed, which moved with their values, since this pass's forward made no copy.
  if (!keep_values) ShareKeptInputs(false);
  for (PlanStep& step : plan_) step.reshape_pending = true;  // the storage moved (BindMemoryPlan reshapes)
  // In the middle of a pass the layers stay as they ran it (a forward-only net still refuses Backward).
  if (reshape && !keep_values) TellLayersBackwardPlanned(true);
  if (reshape) ReshapeSteps(/*every=*/true);
  arena_.reset();
  reused_in_forward_.clear();
}

void Net::PlanMemory(bool with_backward) {
  CREMA_CHECK(!with_backward || rewrites_.size() == training_rewrites_)
      << "net '" << name_ << "' was rewritten for inference (" << rewrites_.size() - training_rewrites_
      << " steps folded or fused) and runs forward only; build it with fold: false (--fold=none) to run it backward";
  plan_with_backward_ = with_backward;
  // A backward pass reads floats: blobs the inference plan kept in 8 bits or bf16 (plan_element_types) hold floats
  // again, in storage of their own (the plan's slots were sized for the other type).
  const auto floats_again = [&] {
    for (size_t id = 0; with_backward && id < blobs_.size(); ++id) {
      if (blobs_[id]->quantization().floats()) continue;
      blobs_[id]->set_quantization({});
      for (PlanStep& step : plan_) step.reshape_pending = true;
    }
  };
  if (!plan_memory_) {
    floats_again();
    // No memory to plan, but the layers may leave out what they keep only for backward all the same (and choose
    // their inference forms: InnerProduct's oneDNN primitive), and Backward is refused, as under a plan.
    TellLayersBackwardPlanned(with_backward);
    return;
  }
  ReleaseMemoryPlan(false, false);  // BindMemoryPlan reshapes
  floats_again();
  BindMemoryPlan();
}

void Net::RecomputeSegments(const std::vector<int>& segments) {
  const std::vector<int> cuts = SegmentCuts(*this);
  for (size_t i = 0; i < segments.size(); ++i) {
    CREMA_CHECK(segments[i] == 0 || std::binary_search(cuts.begin(), cuts.end(), segments[i]))
        << "net '" << name_ << "': a recompute segment cannot begin at step " << segments[i]
        << (segments[i] > 0 && segments[i] < static_cast<int>(plan_.size())
                ? " (layer '" + layer_names_[plan_[segments[i]].layer] +
                      "'): a value crossing there is overwritten later"
                : std::string(": the net has ") + std::to_string(plan_.size()) + " steps");
    CREMA_CHECK(i == 0 || segments[i - 1] < segments[i]) << "net '" << name_ << "': recompute segments must ascend";
  }
  chosen_segments_ = segments;
  PlanMemory(plan_with_backward_);
}

void Net::KeepBlobs(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    blob_by_name(name);  // names the blob a net lacks
    const int id = blob_index_.at(name);
    bool computed = std::find(input_blobs_.begin(), input_blobs_.end(), blobs_[id].get()) != input_blobs_.end();
    for (const PlanStep& step : plan_)
      computed = computed || std::find(step.tops.begin(), step.tops.end(), id) != step.tops.end() ||
                 std::find(step.internals.begin(), step.internals.end(), id) != step.internals.end();
    CREMA_CHECK(computed || rewrites_.empty())
        << "net '" << name_ << "': blob '" << name << "' is no longer computed: the inference rewrites folded the "
        << "step that wrote it into another (" << rewrites_.size() << " rewrites; crema time lists them); ask for it "
        << "before the weights are loaded, or build the net with fold: false (--fold=none)";
    kept_blobs_.insert(id);
  }
  PlanMemory(plan_with_backward_);
}

void Net::UnplanMemory() {
  ReleaseMemoryPlan(false, true);
  plan_memory_ = false;
}

void Net::ReplanIfInputsChanged() {
  if (!memory_plan_) return;
  bool changed = false;
  for (size_t i = 0; i < input_blobs_.size() && !changed; ++i)
    changed = input_blobs_[i]->shape() != planned_input_shapes_[i];
  if (!changed) return;
  ReleaseMemoryPlan(false, false);  // BindMemoryPlan reshapes, for the new shapes
  BindMemoryPlan();
}

void Net::CollectParams() {
  // Parameters named in ParamSpec are shared by every layer that uses the name; the first owns them.
  struct Owner {
    Blob* blob;
    std::string layer;
    int index;
  };
  std::map<std::string, Owner> owners;
  std::vector<bool> lr_mult_given, decay_mult_given;  // per learnable parameter: set explicitly by a user
  layer_learnable_params_.assign(layers_.size(), {});
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer* layer = layers_[l].get();
    const LayerParameter& lp = layer->layer_param();
    CREMA_CHECK(lp.param_size() <= static_cast<int>(layer->params().size()))
        << "layer '" << lp.name() << "' (" << lp.type() << ") has " << layer->params().size()
        << " parameter blob(s), but " << lp.param_size() << " param { } entries are given";
    for (size_t i = 0; i < layer->params().size(); ++i) {
      const ParamSpec spec = static_cast<int>(i) < lp.param_size() ? lp.param(static_cast<int>(i)) : ParamSpec();
      Blob* blob = layer->params()[i].get();
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
        // As in Caffe, the first layer that sets a multiplier explicitly sets it for every user of the parameter;
        // only two explicit values that differ are a contradiction.
        const auto share = [&](const char* field, bool given, float value, std::vector<float>* values,
                               std::vector<bool>* given_before) {
          if (!given) return;
          float& shared = (*values)[owner.index];
          CREMA_CHECK(!(*given_before)[owner.index] || value == shared)
              << "layer '" << lp.name() << "' shares parameter '" << spec.name() << "' but sets " << field << " "
              << value << " where an earlier user (its owner is '" << owner.layer << "') sets " << shared;
          shared = value;
          (*given_before)[owner.index] = true;
        };
        share("lr_mult", spec.has_lr_mult(), spec.lr_mult(), &params_lr_, &lr_mult_given);
        share("decay_mult", spec.has_decay_mult(), spec.decay_mult(), &params_weight_decay_, &decay_mult_given);
        blob->ShareData(*owner.blob);
        blob->ShareDiff(*owner.blob);
        layer_learnable_params_[l].push_back(owner.index);
        continue;
      }
      const int index = static_cast<int>(learnable_params_.size());
      if (!spec.name().empty()) owners[spec.name()] = {blob, lp.name(), index};
      layer_learnable_params_[l].push_back(index);
      learnable_params_.push_back(blob);
      learnable_param_owner_.emplace_back(static_cast<int>(l), static_cast<int>(i));
      params_lr_.push_back(spec.lr_mult());
      params_weight_decay_.push_back(spec.decay_mult());
      lr_mult_given.push_back(spec.has_lr_mult());
      decay_mult_given.push_back(spec.has_decay_mult());
    }
  }
}

void Net::DeriveStepTables() {
  InvalidateLanes();
  // Inputs: the tops of the steps whose layers feed the net from outside (Input, data layers).
  input_blobs_.clear();
  for (const PlanStep& step : plan_)
    if (layers_[step.layer]->TopsAreNetInputs())
      for (int id : step.tops) input_blobs_.push_back(blobs_[id].get());
  // Loss weights, as the layers of the steps declare them for their tops.
  blob_loss_weights_.assign(blobs_.size(), 0.f);
  for (const PlanStep& step : plan_)
    for (size_t t = 0; t < step.tops.size(); ++t) {
      const float weight = layers_[step.layer]->loss(static_cast<int>(t));
      if (weight != 0.f) blob_loss_weights_[step.tops[t]] = weight;
    }
  // A parameter's gradient is complete after the backward of the earliest step whose layer uses it (backward runs
  // the steps in reverse). One that no step uses any more (a pass removed its layer's steps) never changes during
  // a backward: it is complete from the start, and announced after the first step backward runs.
  gradient_ready_step_.assign(learnable_params_.size(), -1);
  for (size_t step = plan_.size(); step-- > 0;)
    for (int param : layer_learnable_params_[plan_[step].layer]) gradient_ready_step_[param] = static_cast<int>(step);
  params_ready_after_.assign(plan_.size(), {});
  for (size_t param = 0; param < learnable_params_.size() && !plan_.empty(); ++param) {
    if (gradient_ready_step_[param] < 0) gradient_ready_step_[param] = static_cast<int>(plan_.size()) - 1;
    params_ready_after_[gradient_ready_step_[param]].push_back(static_cast<int>(param));
  }
  FindOutputs();
}

void Net::FindOutputs() {
  // Outputs: blobs whose last written version no later step reads (in-place steps rewrite a blob). Internal
  // blobs are neither read nor written by steps, so they are never outputs.
  output_blob_indices_.clear();
  std::vector<int> last_write(blobs_.size(), -1), last_read(blobs_.size(), -1);
  for (size_t s = 0; s < plan_.size(); ++s) {
    for (int id : plan_[s].bottoms) last_read[id] = static_cast<int>(s);
    for (int id : plan_[s].tops) last_write[id] = static_cast<int>(s);
  }
  for (size_t id = 0; id < blobs_.size(); ++id) {
    const bool in_place_last = last_read[id] == last_write[id];  // read and rewritten by its last writer
    if (last_read[id] < last_write[id] || (in_place_last && last_write[id] >= 0)) {
      output_blob_indices_.push_back(static_cast<int>(id));
    }
  }
}

std::string Net::UserBlobName(std::string name) const {
  for (auto found = split_sources_.find(name); found != split_sources_.end(); found = split_sources_.find(name))
    name = found->second;
  return name;
}

std::string Net::BottomShapesNote(const std::vector<int>& bottoms) const {
  if (bottoms.empty()) return "";
  std::ostringstream shapes;
  for (size_t b = 0; b < bottoms.size(); ++b)
    shapes << (b ? ", " : "") << "'" << UserBlobName(blob_names_[bottoms[b]]) << "' " << blobs_[bottoms[b]]->shape_string();
  return " [bottom shapes: " + shapes.str() + "]";
}

void Net::RunAfterWeightsPasses() {
  if (after_weights_.empty()) return;
  // The passes see every blob with memory of its own, and the plan is made again for the steps they leave. The layers
  // are made as the net will run them (forward only, where it is: the engines' inference forms, 8-bit ones among
  // them, whose layouts plan_layouts reads); every step is reshaped before it runs again.
  ReleaseMemoryPlan(false, false);
  TellLayersBackwardPlanned(plan_with_backward_);
  for (const NetPass& pass : after_weights_) {
    pass.run(this);
    passes_run_.push_back(pass.name);
    DeriveStepTables();
  }
  after_weights_.clear();
  chosen_segments_.clear();  // steps may have gone
  if (plan_memory_) BindMemoryPlan();
}

// ---------------------------------------------------------------------------------------------------------
// Running

void Net::ReshapeStep(size_t step) {
  if (!StepNeedsReshape(step)) return;
  PlanStep& s = plan_[step];
  Layer* layer = layers_[s.layer].get();
  // The step graph holds while only the layer is made again (a layout pass); a bottom that changed shape or
  // storage, a plan let go or a workspace that moved make it again.
  bool moved = false;
  for (size_t b = 0; b < s.bottoms.size() && !moved; ++b) moved = !s.reshaped_for[b].Matches(*blobs_[s.bottoms[b]]);
  if (moved || layer->ReshapesOnData()) InvalidateLanes();
  if (memory_plan_) {
    // A shape that changes in the middle of a pass (a data layer's tops) would need a larger arena there: the
    // net goes on without a plan, keeping the values written so far.
    for (size_t b = 0; b < s.bottoms.size(); ++b) {
      if (s.reshaped_for[b].shape == blobs_[s.bottoms[b]]->shape()) continue;
      LOG(INFO) << "Net '" << name_ << "': blob '" << UserBlobName(blob_names_[s.bottoms[b]]) << "' changed shape to "
                << blobs_[s.bottoms[b]]->shape_string() << " in the middle of a pass; the net runs without a "
                << "memory plan from now on";
      ReleaseMemoryPlan(true, true);
      plan_memory_ = false;
      break;
    }
  }
  const std::vector<Blob*> bottoms = Blobs(s.bottoms);
  const std::vector<Blob*> tops = Blobs(s.tops);
  try {
    for (const Layer::TopView& view : s.views) tops[view.top]->ViewOf(*bottoms[view.bottom], view.diff);
    layer->ReshapeAll(bottoms, tops);
  } catch (const Error& error) {
    CREMA_FAIL() << "reshaping net '" << name_ << "': " << NamingLayer(error.what(), layer->name(), layer->type())
                 << BottomShapesNote(s.bottoms);
  }
  for (size_t b = 0; b < bottoms.size(); ++b) s.reshaped_for[b] = BlobSignature::Of(*bottoms[b]);
  s.reshape_pending = false;
  // The layer's slot of the arena, if it has one; a request that outgrew it goes back to the shared workspace.
  std::shared_ptr<Blob>* slot = s.layer < static_cast<int>(layer_workspaces_.size()) && layer_workspaces_[s.layer]
                                    ? &layer_workspaces_[s.layer]
                                    : nullptr;
  if (slot != nullptr && layer->workspace_floats() > static_cast<size_t>((*slot)->count())) {
    InvalidateLanes();
    slot->reset();
    slot = nullptr;
    layer->set_workspace(workspace_);
  }
  if (slot == nullptr && layer->workspace_floats() > static_cast<size_t>(workspace_->count())) {
    workspace_->Reshape({static_cast<int>(layer->workspace_floats())});
    InvalidateLanes();  // the shared workspace has new storage
  }
}

void Net::Reshape() {
  ReplanIfInputsChanged();
  ReshapeSteps(/*every=*/false);
}

void Net::ReshapeSteps(bool every) {
  if (every)
    for (PlanStep& step : plan_) step.reshape_pending = true;
  for (size_t step = 0; step < plan_.size(); ++step) ReshapeStep(step);
}

void Net::set_step_timing(bool on) {
  step_timing_ = on;
  if (on) step_times_.assign(plan_.size(), StepTimes());
}

double Net::StepTimer::Stop() {
  if (!running) return 0;
  if (net->context_->device() == Device::kGPU) net->context_->Synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Net::StepTimer Net::StartStepTimer() {
  StepTimer timer{this, step_timing_, {}};
  if (!step_timing_) return timer;
  if (context_->device() == Device::kGPU) context_->Synchronize();  // the work of earlier steps is not this one's
  timer.start = std::chrono::steady_clock::now();
  return timer;
}

bool Net::StepNeedsReshape(size_t step) const {
  const PlanStep& s = plan_[step];
  bool changed = layers_[s.layer]->ReshapesOnData() || s.reshape_pending;
  for (size_t b = 0; b < s.bottoms.size() && !changed; ++b) changed = !s.reshaped_for[b].Matches(*blobs_[s.bottoms[b]]);
  return changed;
}

float Net::ForwardStep(size_t step) {
  ReshapeStep(step);
  return RunForwardStep(step);
}

float Net::RunForwardStep(size_t step) {
  const PlanStep& s = plan_[step];
  Layer& layer = *layers_[s.layer];
  if (derived_of_layer_[s.layer] >= 0) RefreshDerivedParams(s.layer);
  float loss = 0.f;
  StepTimer timer = StartStepTimer();
  try {
    if (step < schedule_.replayed.size() && schedule_.replayed[step]) layer.PrepareReplay();
    loss = layer.Forward(Blobs(s.bottoms), Blobs(s.tops));
    if (timer.running) step_times_[step].forward_ms += timer.Stop();
  } catch (const Error& error) {
    CREMA_FAIL() << NamingLayer(error.what(), layer.name(), layer.type());
  } catch (const std::bad_alloc&) {
    CREMA_FAIL() << NamingLayer("out of host memory in the forward pass", layer.name(), layer.type());
  }
  if (debug_info_) ForwardDebugInfo(step);
  if (check_finite_) {
    const std::string where = DescribeNonFinite(step, /*gradients=*/false);
    CREMA_CHECK(where.empty()) << "non-finite value in the forward pass of net '" << name_ << "': " << where
                               << " (debug_info checks every step)";
  }
  return loss;
}

void Net::ReplayStep(size_t step) {
  const PlanStep& s = plan_[step];
  Layer& layer = *layers_[s.layer];
  StepTimer timer = StartStepTimer();
  try {
    layer.Replay(Blobs(s.bottoms), Blobs(s.tops));
    if (timer.running) step_times_[step].backward_ms += timer.Stop();
  } catch (const Error& error) {
    CREMA_FAIL() << NamingLayer(error.what(), layer.name(), layer.type()) << " (recomputing it for backward)";
  } catch (const std::bad_alloc&) {
    CREMA_FAIL() << NamingLayer("out of host memory recomputing the forward pass", layer.name(), layer.type());
  }
}

void Net::GradientReady::Then(const std::function<void()>& work) const {
  if (side_ == nullptr) {
    work();
  } else {
    side_->Queue(event_, work);
  }
}

void Net::set_gradient_ready_callback(std::function<void(const GradientReady&)> callback) {
  gradient_ready_ = std::move(callback);
  // Backward's schedule on streams records an event after each step that completes a gradient only with a callback.
  backward_streams_ = StreamSchedule();
}

void Net::set_gradient_ready_callback(std::function<void(int)> callback) {
  if (!callback) {
    set_gradient_ready_callback(std::function<void(const GradientReady&)>());
    return;
  }
  set_gradient_ready_callback(
      [callback = std::move(callback)](const GradientReady& ready) { callback(ready.index()); });
}

void Net::FireGradientHooks(size_t step, SideStream* side, int event) {
  if (!gradient_ready_ || params_ready_after_[step].empty()) return;
  std::lock_guard<std::mutex> lock(gradient_ready_mutex_);
  for (int param : params_ready_after_[step]) gradient_ready_(GradientReady(param, side, event));
}

void Net::BackwardStep(size_t step) {
  RunBackwardStep(step);
  FireGradientHooks(step);
}

void Net::RunBackwardStep(size_t step) {
  CREMA_CHECK(layers_backward_planned_ || !plan_[step].needs_backward)
      << "net '" << name_ << "' plans its memory for forward passes only (PlanMemory(false)), so the values "
      << "backward needs are gone once read; plan it for backward too (PlanMemory(true)) to run it backward";
  const PlanStep& s = plan_[step];
  if (s.needs_backward) {
    Layer& layer = *layers_[s.layer];
    StepTimer timer = StartStepTimer();
    try {
      layer.Backward(Blobs(s.tops), s.propagate_down, Blobs(s.bottoms));
      if (timer.running) step_times_[step].backward_ms += timer.Stop();
    } catch (const Error& error) {
      CREMA_FAIL() << NamingLayer(error.what(), layer.name(), layer.type());
    } catch (const std::bad_alloc&) {
      CREMA_FAIL() << NamingLayer("out of host memory in the backward pass", layer.name(), layer.type());
    }
    if (debug_info_) BackwardDebugInfo(step);
    if (check_finite_) {
      const std::string where = DescribeNonFinite(step, /*gradients=*/true);
      CREMA_CHECK(where.empty()) << "non-finite value in the backward pass of net '" << name_ << "': " << where
                                 << " (debug_info checks every step)";
    }
  }
}

float Net::Forward() {
  context_->MakeCurrent();
  ReplanIfInputsChanged();
  if (lanes() > 1) return stream_device_ ? ForwardOnStreams() : ForwardOnLanes();
  float loss = 0.f;
  for (size_t step = 0; step < plan_.size(); ++step) loss += ForwardStep(step);
  return loss;
}

void Net::MakeStepStorage(bool gradients) {
  // Storage is made on first use (SyncedMemory): two lanes making the arena at once would each make one. Every
  // storage the steps use is made before any lane runs (storage that moves later makes the graphs again).
  // Gradients only where backward touches them: the tops and internal blobs of a step that runs backward, and the
  // bottoms it propagates to (an input's gradient no step writes is never made).
  for (const PlanStep& s : plan_) {
    const Layer& layer = *layers_[s.layer];
    const bool backward = gradients && s.needs_backward;
    for (const std::vector<int>* ids : {&s.bottoms, &s.tops, &s.internals})
      for (size_t k = 0; k < ids->size(); ++k) {
        Blob& blob = *blobs_[(*ids)[k]];
        if (blob.count() == 0) continue;
        blob.cpu_bytes();
        const bool propagated = ids != &s.bottoms || (k < s.propagate_down.size() && s.propagate_down[k]);
        if (backward && propagated) blob.cpu_diff_bytes();
      }
    for (size_t t = 0; t < s.tops.size(); ++t)
      if (layer.loss(static_cast<int>(t)) != 0.f && blobs_[s.tops[t]]->count() > 0) blobs_[s.tops[t]]->cpu_diff();
    for (const auto& param : layer.params()) {
      if (param->count() == 0) continue;
      param->cpu_data();
      if (gradients) param->cpu_diff();
    }
    const Blob* workspace = layer.workspace_blob();
    if (workspace != nullptr && workspace->count() > 0) workspace->cpu_data();
  }
}

float Net::ForwardOnLanes() {
  ReshapeSteps(/*every=*/false);
  if (!step_lanes_.prepared()) {
    MakeStepStorage(/*gradients=*/false);
    step_lanes_.Prepare(ArrangeForLanes(ForwardStepAccess(*this), &forward_steps_));
  }
  std::vector<float> losses(plan_.size(), 0.f);
  const std::vector<int> left = step_lanes_.Run([&](int i) {
    const int step = forward_steps_[i];
    if (StepNeedsReshape(step)) return false;
    losses[step] = RunForwardStep(step);
    return true;
  });
  // The lanes' order keeps every edge: the rest runs in it.
  for (int i : left) losses[forward_steps_[i]] = ForwardStep(forward_steps_[i]);
  // The loss in the plan's order, as Forward sums it.
  float loss = 0.f;
  for (float step_loss : losses) loss += step_loss;
  return loss;
}

namespace {

// The streams' graph of a pass: every step may run beside any other the edges allow (a kernel's results do not depend
// on the stream it runs on, so no step runs alone).
StepGraph StreamsGraph(std::vector<StepAccess> access) {
  for (StepAccess& step : access) step.alone = false;
  return StepGraphOf(access);
}

}  // namespace

float Net::ForwardOnStreams() {
  ReshapeSteps(/*every=*/false);
  if (forward_streams_.steps.empty()) {
    if (context_->device() == Device::kCPU) MakeStepStorage(/*gradients=*/false);
    const std::vector<StepAccess> access = ForwardStepAccess(*this);
    forward_streams_ = ScheduleOnStreams(StreamsGraph(access), lanes_);
    NoteStorageUses(access, &forward_streams_);
  }
  std::vector<float> losses(plan_.size(), 0.f);
  RunOnStreams(forward_streams_, stream_device_.get(), [&](int step) {
    CREMA_CHECK(!StepNeedsReshape(step)) << "net '" << name_ << "': layer '" << layer_names_[plan_[step].layer]
                                         << "' found its bottoms reshaped in a pass on streams";
    losses[step] = RunForwardStep(step);
  });
  float loss = 0.f;
  for (float step_loss : losses) loss += step_loss;
  return loss;
}

void Net::BackwardOnStreams() {
  if (backward_streams_.steps.empty()) {
    if (context_->device() == Device::kCPU) MakeStepStorage(/*gradients=*/true);
    backward_steps_ = BackwardSteps(*this);  // on streams, in the order backward runs them
    const std::vector<StepAccess> access = BackwardStepAccess(*this);
    // With a gradient hook, each step that completes a parameter's gradient records an event for it.
    std::vector<bool> announced(backward_steps_.size(), false);
    for (size_t i = 0; gradient_ready_ && i < backward_steps_.size(); ++i)
      announced[i] = !params_ready_after_[backward_steps_[i]].empty();
    backward_streams_ = ScheduleOnStreams(StreamsGraph(access), lanes_, &announced);
    NoteStorageUses(access, &backward_streams_);
  }
  // The hooks fire as the steps are queued, each with its step's event; the work they queue runs on the side stream.
  BesideThePass hooks;
  hooks.queued = [&](const StreamStep& queued, SideStream* side) {
    FireGradientHooks(backward_steps_[queued.step], side, queued.event);
  };
  hooks.last = [&](SideStream* side) { FireHooksOfStepsWithoutBackward(side); };
  RunOnStreams(
      backward_streams_, stream_device_.get(), [&](int i) { RunBackwardStep(backward_steps_[i]); },
      gradient_ready_ ? &hooks : nullptr);
}

void Net::FireHooksOfStepsWithoutBackward(SideStream* side) {
  // A parameter no step with a gradient uses: its hook fires at the end.
  if (!gradient_ready_) return;
  std::lock_guard<std::mutex> lock(gradient_ready_mutex_);
  for (size_t step = plan_.size(); step-- > 0;) {
    if (plan_[step].needs_backward) continue;
    for (int param : params_ready_after_[step]) gradient_ready_(GradientReady(param, side, -1));
  }
}

void Net::LogPrecisions() const {
  // Only the products' layers take a precision (core/element_type.hpp); the rest compute in float32 whatever is asked.
  const auto takes_precision = [](const Layer& layer) {
    const std::string type = layer.type();
    return type == "Convolution" || type == "Deconvolution" || type == "InnerProduct";
  };
  std::map<Precision, std::vector<std::string>> computing;
  std::vector<std::string> refused;
  bool asked = false;
  for (const auto& layer : layers_) {
    if (!takes_precision(*layer)) continue;
    const Precision want = layer->requested_precision();
    asked = asked || want != Precision::kFloat32;
    if (layer->computes_in() != Precision::kFloat32)
      computing[layer->computes_in()].push_back(layer->name());
    else if (want != Precision::kFloat32)
      refused.push_back(layer->name() + " [" + layer->engine() + "]");
  }
  if (!asked) return;
  const auto list = [](const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
  };
  // On the CPU, bf16 layers' neighbours have bf16 rules of their own (docs/solvers.md); on a GPU, none.
  const bool gpu = context_->device() == Device::kGPU;
  for (const auto& [precision, names] : computing)
    LOG(INFO) << "Net '" << name_ << "': " << names.size() << " layers compute their products in "
              << PrecisionName(precision) << " with float32 sums" << (gpu ? " on the GPU's tensor cores" : "") << " ("
              << list(names) << "); "
              << (gpu || precision != Precision::kBfloat16
                      ? ""
                      : "fused BatchNorms, residual sums and Splits between them read their operands rounded to bf16 "
                        "(their bf16 rules, docs/solvers.md); ")
              << "every other step, the losses and the update of the float32 master weights in float32";
  if (!refused.empty())
    LOG(INFO) << "Net '" << name_ << "': " << refused.size() << " layers asked for half precision compute in float32 ("
              << list(refused)
              << (gpu ? "; their engines have no such kernels, or this GPU's tensor cores do not multiply in it)"
                      : "; their engines have no such kernels here, or the CPU lacks them)");
}

void Net::ChooseLanes(int requested) {
  std::string refusal;
  // On a GPU (and in its host rehearsal) lanes are streams: only when asked for, since they have not yet run on a GPU.
  const bool streams = context_->device() == Device::kGPU || context_->streams_on_host();
  if (streams && requested == 0) refusal = "on a GPU, lanes are used only when asked for";
  if (debug_info_) refusal = "debug_info";
  for (const auto& layer : layers_) {
    if (std::strcmp(layer->type(), "Python") == 0) refusal = "a Python layer";
    if (layer->ReshapesOnData()) refusal = "a layer whose tops' shapes follow its bottoms' values";
  }
  const int threads = OpenMpThreadCount();
  lanes_automatic_ = requested == 0 && refusal.empty() && threads >= 2 && threads <= 4;
  lanes_ = !refusal.empty() ? 1 : requested > 0 ? requested : lanes_automatic_ ? threads : 1;
  if (requested > 1 && !refusal.empty())
    LOG(INFO) << "Net '" << name_ << "' runs its steps in order (" << refusal << "), not on " << requested << " lanes";
  stream_device_.reset();
  if (streams && lanes_ > 1) {
    if (context_->device() == Device::kGPU) {
      stream_device_ = DeviceStreams(context_.get());
    } else {
      stream_device_ = std::make_unique<RehearsedStreams>(context_->random_seed());
    }
  }
  step_lanes_.Configure(lanes_, lanes_automatic_);
  backward_lanes_.Configure(lanes_, lanes_automatic_);
  InvalidateLanes();
}

void Net::set_lanes(int lanes) {
  CREMA_CHECK(lanes >= 0) << "net '" << name_ << "': " << lanes << " is not a number of lanes";
  ChooseLanes(lanes);
  if (plan_memory_) PlanMemory(plan_with_backward_);
}

void Net::BackwardOnLanes() {
  if (!backward_lanes_.prepared()) {
    MakeStepStorage(/*gradients=*/true);
    const std::vector<int> steps = BackwardSteps(*this);
    std::vector<int> order;
    backward_lanes_.Prepare(ArrangeForLanes(BackwardStepAccess(*this), &order));
    backward_steps_.clear();
    for (int i : order) backward_steps_.push_back(steps[i]);
  }
  const std::vector<int> left = backward_lanes_.Run([&](int i) {
    BackwardStep(backward_steps_[i]);
    return true;
  });
  CREMA_CHECK(left.empty()) << "net '" << name_ << "': " << left.size() << " steps of backward did not run";
  FireHooksOfStepsWithoutBackward();
}

void Net::Backward() {
  context_->MakeCurrent();
  if (loss_scale_ != 1.f) {
    // Forward set each loss top's diff to its weight; backward starts from it scaled.
    for (size_t id = 0; id < blobs_.size(); ++id)
      if (blob_loss_weights_[id] != 0.f)
        scale(*context_, blobs_[id]->count(), loss_scale_, blobs_[id]->mutable_diff_on(context_->device()));
  }
  if (lanes_ > 1 && schedule_.replays == 0 && stream_device_) {
    BackwardOnStreams();
  } else if (lanes_ > 1 && schedule_.replays == 0) {
    BackwardOnLanes();
  } else if (schedule_.replays > 0) {
    for (size_t e = plan_.size(); e < schedule_.events.size(); ++e) {
      const PassEvent& event = schedule_.events[e];
      if (event.kind == PassEvent::Kind::kReplay) {
        ReplayStep(event.step);
      } else {
        BackwardStep(event.step);
      }
    }
  } else {
    for (size_t step = plan_.size(); step-- > 0;) BackwardStep(step);
  }
  ZeroPendingParamDiffs();
  if (debug_info_) {
    double asum_data = 0, asum_diff = 0, sumsq_data = 0, sumsq_diff = 0;
    for (Blob* param : learnable_params_) {
      const float* data = param->cpu_data();
      const float* diff = param->cpu_diff();
      for (int i = 0; i < param->count(); ++i) {
        asum_data += std::fabs(data[i]);
        asum_diff += std::fabs(diff[i]);
        sumsq_data += static_cast<double>(data[i]) * data[i];
        sumsq_diff += static_cast<double>(diff[i]) * diff[i];
      }
    }
    LOG(INFO) << "    [Backward] All net params (data, diff): L1 norm = (" << asum_data << ", " << asum_diff
              << "); L2 norm = (" << std::sqrt(sumsq_data) << ", " << std::sqrt(sumsq_diff) << ")";
  }
}

// ---------------------------------------------------------------------------------------------------------
// Debug information (Caffe's debug_info lines: people's scripts parse them, so the shapes are Caffe's)

namespace {

// The mean absolute value of a blob's data or diff, read on the host (debugging only; 0 for an empty blob). Data in
// another element type (bf16 in training, where the solver's debug_info turns the net's on later) as its floats.
double MeanAbs(const Blob& blob, bool diff) {
  if (blob.count() == 0) return 0;
  std::vector<float> converted;
  const float* values = diff ? blob.cpu_diff() : DataAsFloats(blob, &converted);
  double sum = 0;
  for (int i = 0; i < blob.count(); ++i) sum += std::fabs(values[i]);
  return sum / blob.count();
}

}  // namespace

std::string Net::ParamDisplayName(int layer, int param) const {
  const LayerParameter& spec = layers_[layer]->layer_param();
  if (param < spec.param_size() && !spec.param(param).name().empty()) return spec.param(param).name();
  return std::to_string(param);
}

std::string Net::learnable_param_display_name(int index) const {
  return ParamDisplayName(learnable_param_owner_[index].first, learnable_param_owner_[index].second);
}

void Net::ForwardDebugInfo(size_t step) const {
  const PlanStep& s = plan_[step];
  const std::string& layer = layer_names_[s.layer];
  for (int id : s.tops)
    LOG(INFO) << "    [Forward] Layer " << layer << ", top blob " << blob_names_[id]
              << " data: " << MeanAbs(*blobs_[id], false);
  const auto& params = layers_[s.layer]->params();
  for (size_t i = 0; i < params.size(); ++i)
    LOG(INFO) << "    [Forward] Layer " << layer << ", param blob " << ParamDisplayName(s.layer, static_cast<int>(i))
              << " data: " << MeanAbs(*params[i], false);
}

void Net::BackwardDebugInfo(size_t step) const {
  const PlanStep& s = plan_[step];
  const std::string& layer = layer_names_[s.layer];
  for (size_t b = 0; b < s.bottoms.size(); ++b) {
    if (!s.propagate_down[b]) continue;
    LOG(INFO) << "    [Backward] Layer " << layer << ", bottom blob " << blob_names_[s.bottoms[b]]
              << " diff: " << MeanAbs(*blobs_[s.bottoms[b]], true);
  }
  Layer& owner = *layers_[s.layer];
  for (size_t i = 0; i < owner.params().size(); ++i) {
    if (!owner.param_propagate_down(static_cast<int>(i))) continue;
    LOG(INFO) << "    [Backward] Layer " << layer << ", param blob " << i
              << " diff: " << MeanAbs(*owner.params()[i], true);
  }
}

void Net::ZeroParamDiff(size_t index) {
  const auto [l, k] = learnable_param_owner_[index];
  if (layers_[l]->param_gradient_zero_pending(k)) layers_[l]->TakeParamGradientZeroing(k);
  set(*context_, learnable_params_[index]->count(), 0.f, learnable_params_[index]->mutable_diff_on(context_->device()));
}

void Net::ClearParamDiffs() {
  for (size_t i = 0; i < learnable_params_.size(); ++i) ZeroParamDiff(i);
}

void Net::ClearParamDiffsInBackward() {
  // On the host, a parameter one layer alone uses, whose backward runs and writes its gradient, gets its zeroing
  // there (Layer::ZeroParamGradientInBackward): written rather than added to, a pass over it saved.
  std::vector<int> users(learnable_params_.size(), 0);
  for (const std::vector<int>& indices : layer_learnable_params_)
    for (int index : indices) ++users[index];
  std::vector<bool> backward_runs(layers_.size(), false);
  for (const PlanStep& step : plan_)
    if (step.needs_backward) backward_runs[step.layer] = true;
  for (size_t i = 0; i < learnable_params_.size(); ++i) {
    const auto [l, k] = learnable_param_owner_[i];
    Layer& layer = *layers_[l];
    if (context_->device() == Device::kCPU && layers_backward_planned_ && users[i] == 1 && backward_runs[l] &&
        layer.WritesZeroedParamGradients() && layer.param_propagate_down(k) &&
        layer.params()[k].get() == learnable_params_[i]) {
      layer.ZeroParamGradientInBackward(k);
    } else {
      ZeroParamDiff(i);
    }
  }
}

void Net::ZeroPendingParamDiffs() {
  for (size_t i = 0; i < learnable_params_.size(); ++i) {
    const auto [l, k] = learnable_param_owner_[i];
    if (layers_[l]->param_gradient_zero_pending(k)) ZeroParamDiff(i);
  }
}

namespace {

// The index of the first NaN or infinity among `values`, or -1.
int FirstNonFinite(const float* values, int count) {
  for (int i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) return i;
  return -1;
}

}  // namespace

std::string Net::DescribeNonFinite(size_t step, bool gradients) const {
  const PlanStep& s = plan_[step];
  Layer& layer = *layers_[s.layer];
  const std::string who = "layer '" + layer_names_[s.layer] + "' (" + layer.type() + ") produced ";
  std::ostringstream out;
  if (!gradients) {
    for (int id : s.tops) {
      const Blob& blob = *blobs_[id];
      if (blob.quantization().integers()) continue;  // integers are finite
      std::vector<float> converted;
      const float* values = DataAsFloats(blob, &converted);
      const int bad = FirstNonFinite(values, blob.count());
      if (bad < 0) continue;
      out << who << values[bad] << " in top '" << blob_names_[id] << "' " << blob.shape_string() << " at element "
          << bad;
      return out.str();
    }
    return "";
  }
  for (size_t b = 0; b < s.bottoms.size(); ++b) {
    if (!s.propagate_down[b]) continue;
    const Blob& blob = *blobs_[s.bottoms[b]];
    std::vector<float> converted;
    const float* gradient = DiffAsFloats(blob, &converted);
    const int bad = FirstNonFinite(gradient, blob.count());
    if (bad < 0) continue;
    out << who << gradient[bad] << " in the gradient of bottom '" << blob_names_[s.bottoms[b]] << "' "
        << blob.shape_string() << " at element " << bad;
    return out.str();
  }
  for (size_t i = 0; i < layer.params().size(); ++i) {
    if (!layer.param_propagate_down(static_cast<int>(i))) continue;
    const Blob& blob = *layer.params()[i];
    const int bad = FirstNonFinite(blob.cpu_diff(), blob.count());
    if (bad < 0) continue;
    out << who << blob.cpu_diff()[bad] << " in the gradient of its parameter "
        << ParamDisplayName(s.layer, static_cast<int>(i)) << " " << blob.shape_string() << " at element " << bad;
    return out.str();
  }
  return "";
}

std::string Net::DescribeFirstNonFinite() const {
  // Under a memory plan, a top whose memory a later step reused no longer holds what its layer wrote: the search
  // skips those steps, and says so.
  bool skipped = false;
  for (size_t step = 0; step < plan_.size(); ++step) {
    const PlanStep& s = plan_[step];
    if (!reused_in_forward_.empty() &&
        std::any_of(s.tops.begin(), s.tops.end(), [&](int id) { return reused_in_forward_[id]; })) {
      skipped = true;
      continue;
    }
    const std::string where = DescribeNonFinite(step, /*gradients=*/false);
    if (!where.empty())
      return where + (skipped ? " (the first found: the memory plan had reused some earlier tops; debug_info, "
                                "which keeps every blob, finds the first layer)"
                              : "");
  }
  return "";
}

bool Net::has_loss() const {
  return std::any_of(blob_loss_weights_.begin(), blob_loss_weights_.end(), [](float weight) { return weight != 0.f; });
}

size_t Net::activation_bytes() const {
  std::set<const SyncedMemory*> seen;
  size_t bytes = 0;
  for (const auto& blob : blobs_) {
    if (seen.insert(blob->data().get()).second) bytes += blob->data()->size();
  }
  return bytes;
}

std::vector<Net::HeldBuffer> Net::HeldBuffers() const {
  std::vector<HeldBuffer> held;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (Layer::HeldBuffer& buffer : layers_[i]->HeldBuffers())
      if (buffer.bytes > 0) held.push_back({static_cast<int>(i), std::move(buffer)});
    // A rewritten layer's parameters of its own (weights with a BatchNorm folded in), beside the file's.
    if (derived_of_layer_[i] < 0) continue;
    const auto& original = layers_[rewrite_of_[i]]->params();
    size_t bytes = 0;
    for (const auto& param : layers_[i]->params())
      if (std::find(original.begin(), original.end(), param) == original.end()) bytes += param->count() * sizeof(float);
    if (bytes > 0) held.push_back({static_cast<int>(i), {"parameters folded for inference", bytes, Device::kCPU}});
  }
  std::stable_sort(held.begin(), held.end(),
                   [](const HeldBuffer& a, const HeldBuffer& b) { return a.buffer.bytes > b.buffer.bytes; });
  return held;
}

void Net::IndexLayerName(int index, Layer& layer) {
  const std::string& name = layer_names_[index];
  auto [found, first] = layer_index_.emplace(name, index);
  if (first) return;
  // Caffe accepts two layers of one name (BVLC's MNIST autoencoder has two named "loss"). Names are how weights
  // files, --weights and a snapshot's layer state find a layer, so the name must still point at one layer with
  // parameters or saved state: that one is what the name means here.
  Layer& earlier = *layers_[found->second];
  const auto holds = [](Layer& l) { return !l.params().empty() || l.HasRuntimeState(); };
  CREMA_CHECK(!holds(earlier) || !holds(layer))
      << "two layers are named '" << name << "' (" << earlier.type() << ", then " << layer.type()
      << ") and both hold "
      << (!earlier.params().empty() && !layer.params().empty() ? "parameters" : "state saved in snapshots")
      << ": a weights file (.caffemodel, --weights) or a snapshot finds a layer by its name, and could not tell "
         "which of the two is meant; rename one";
  const bool later_holds = holds(layer);
  if (later_holds) found->second = index;
  LOG(WARNING) << "net '" << name_ << "': two layers are named '" << name << "' (" << earlier.type() << ", then "
               << layer.type() << "); accepted as Caffe does"
               << (later_holds || holds(earlier) ? std::string("; weights and saved state of that name go to the ") +
                                                      (later_holds ? "later" : "earlier") + " one"
                                                 : std::string());
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

std::vector<std::string> Net::CopyTrainedLayersFrom(const NetParameter& trained) {
  // Only V1 and V0 files keep weights where this cannot find them; other deprecated fields do not matter here.
  if (trained.layers_size() > 0) {
    NetParameter upgraded(trained);
    UpgradeLegacyNetAndLog(&upgraded, "weights '" + trained.name() + "'");
    return CopyTrainedLayersFrom(upgraded);
  }
  const std::vector<std::string> copied = CopyMatchingLayers(trained);
  // Weights that reach no layer at all are a wrong file (another net's, a net definition, an empty file), not
  // fine-tuning: running on would score, extract or train from the fillers' random values.
  std::vector<std::string> with_params, in_file;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (!layers_[l]->params().empty() && !added_by_pass_[l] && rewrite_of_[l] == static_cast<int>(l))
      with_params.push_back(layer_names_[l]);
  for (const auto& source : trained.layer())
    if (source.blobs_size() > 0) in_file.push_back(source.name());
  CREMA_CHECK(!copied.empty() || with_params.empty())
      << "none of the " << with_params.size() << " layer(s) with parameters of net '" << name_ << "' ("
      << NameList(with_params) << ") has weights there: "
      << (in_file.empty() ? std::string("it holds no weights at all")
                          : "it holds weights for layer(s) " + NameList(in_file) +
                                " only, and weights go to the layer of the same name");
  return copied;
}

std::vector<std::string> Net::CopyMatchingLayers(const NetParameter& trained) {
  // Parameters shared by name are learnable only through their owner; the others are views of it.
  const std::set<const Blob*> owned(learnable_params_.begin(), learnable_params_.end());
  std::vector<std::string> copied;
  for (const auto& source : trained.layer()) {
    if (source.blobs_size() == 0) continue;
    auto found = layer_index_.find(source.name());
    if (found == layer_index_.end()) {
      LOG(INFO) << "Ignoring source layer " << source.name() << " (not in net '" << name_ << "')";
      continue;
    }
    Layer* layer = layers_[found->second].get();
    auto& targets = layer->params();
    CREMA_CHECK(static_cast<int>(targets.size()) == source.blobs_size())
        << "cannot copy weights into layer '" << source.name() << "' (" << layer->type() << "): the weights file has "
        << source.blobs_size() << " parameter blob(s), the net has " << targets.size();
    for (int i = 0; i < source.blobs_size(); ++i) {
      const BlobProto& blob = source.blobs(i);
      const bool absent = !blob.has_shape() && !blob.has_num() && !blob.has_channels() && !blob.has_height() &&
                          !blob.has_width() && blob.data_size() == 0 && blob.double_data_size() == 0;
      if (absent) {
        CREMA_CHECK(!owned.count(targets[i].get()))
            << "cannot copy weights into layer '" << source.name() << "' (" << layer->type()
            << "): the weights file has no values for its parameter blob " << i;
        continue;
      }
      const std::vector<int> stored = Blob::ShapeOf(blob);
      const bool same = stored == targets[i]->shape();
      // Old files store 4-d legacy shapes (1 x 1 x N x K for inner products); accept equal counts there.
      int64_t stored_count = 1;
      for (int d : stored) stored_count *= d;
      const bool legacy_match = !blob.has_shape() && stored_count == targets[i]->count();
      CREMA_CHECK(same || legacy_match) << "cannot copy weights into layer '" << source.name() << "' (" << layer->type()
                                        << "): parameter blob " << i << " has shape " << ShapeString(stored)
                                        << " in the weights file but " << targets[i]->shape_string() << " in the net";
      if (same) {
        targets[i]->FromProto(blob, /*reshape=*/false);
      } else {
        const std::vector<int> shape = targets[i]->shape();
        targets[i]->FromProto(blob, /*reshape=*/true);
        targets[i]->Reshape(shape);
      }
    }
    copied.push_back(source.name());
  }
  return copied;
}

std::vector<std::string> Net::CopyTrainedLayersFrom(const std::string& path) {
  // ReadWeightsFile refuses folders and empty files, naming them; text weights (rare) read a folder as
  // ReadFileToString refuses it, and an empty text file holds no weights (refused below).
  NetParameter trained;
  const std::string extension = std::filesystem::path(path).extension().string();
  const bool text = extension == ".prototxt" || extension == ".txt";
  if (text) {
    ReadProtoFromTextFile(path, &trained);
  } else {
    ReadWeightsFile(path, &trained);
  }
  // V1 and V0 files keep their weights in `layers`: upgraded here, the notices name the file.
  if (trained.layers_size() > 0) UpgradeLegacyNetAndLog(&trained, path);
  try {
    return CopyTrainedLayersFrom(trained);
  } catch (const Error& error) {
    bool net_definition = false;  // a .prototxt given as weights: layers, none with blobs
    for (const auto& layer : trained.layer()) net_definition = text && (net_definition || !layer.type().empty());
    for (const auto& layer : trained.layer()) net_definition = net_definition && layer.blobs_size() == 0;
    CREMA_FAIL() << "weights file '" << path << "': " << error.what()
                 << (net_definition ? " (it looks like a net definition, not trained weights)" : "");
  }
  return {};
}

std::vector<std::string> Net::LayersNotCopied(const std::vector<std::string>& copied_layers) const {
  // A parameter is covered when its storage is that of a copied layer's parameter (shared parameters included).
  std::set<const SyncedMemory*> covered;
  for (const auto& name : copied_layers) {
    auto found = layer_index_.find(name);
    if (found == layer_index_.end()) continue;
    for (const auto& blob : layers_[found->second]->params()) covered.insert(blob->data().get());
  }
  std::vector<std::string> missing;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (rewrite_of_[l] != static_cast<int>(l)) continue;  // derived from the layer it stands for
    for (const auto& blob : layers_[l]->params()) {
      if (!covered.count(blob->data().get())) {
        missing.push_back(layer_names_[l]);
        break;
      }
    }
  }
  return missing;
}

void Net::ShareTrainedLayersWith(const Net& other) {
  for (size_t l = 0; l < other.layers_.size(); ++l) {
    if (other.rewrite_of_[l] != static_cast<int>(l)) continue;
    auto found = layer_index_.find(other.layer_names_[l]);
    if (found == layer_index_.end()) continue;
    auto& mine = layers_[found->second]->params();
    const auto& theirs = other.layers_[l]->params();
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
    // Split layers are the net's own business: the file keeps each layer's bottoms as the prototxt named them, so
    // that the definition it carries builds the same net again (an Input layer made from the deprecated `input`
    // fields is written: the net needs it).
    if (added_by_pass_[l] && layers_[l]->type() == std::string("Split")) continue;
    // A layer rewritten for inference is written as the prototxt has it, with its own parameters.
    if (rewrite_of_[l] != static_cast<int>(l)) continue;
    LayerParameter* layer = param->add_layer();
    layers_[l]->ToProto(layer, write_diff);
    for (int b = 0; b < layer->bottom_size(); ++b) layer->set_bottom(b, UserBlobName(layer->bottom(b)));
  }
}

NetParameter ReadNetDefinition(const std::string& path) {
  NetParameter param;
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension != ".caffemodel" && extension != ".h5" && extension != ".hdf5") {
    ReadProtoFromTextFile(path, &param);
    return param;
  }
  ReadWeightsFile(path, &param);
  UpgradeLegacyNetAndLog(&param, path);
  bool defined = param.layer_size() > 0;
  for (const auto& layer : param.layer()) defined = defined && !layer.type().empty();
  CREMA_CHECK(defined) << "weights file '" << path << "' carries no net definition (its layers have no types"
                       << (extension == ".caffemodel" ? "" : ": HDF5 weights keep only the parameter blobs")
                       << "); give the net's prototxt as well";
  // The file holds the layers of the one net that wrote it: built again as they are, for any phase.
  for (auto& layer : *param.mutable_layer()) {
    layer.clear_blobs();
    layer.clear_phase();
    layer.clear_include();
    layer.clear_exclude();
  }
  param.clear_state();
  return param;
}

void Net::SaveRuntimeState(const std::string& net_name, SolverState* state) const {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& layer = layers_[l];
    if (!layer->HasRuntimeState() || rewrite_of_[l] != static_cast<int>(l)) continue;
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
