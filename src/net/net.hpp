// Net: turns a NetParameter into a fixed execution plan over layers and blobs, and runs it.
//
// A net is built by a list of named passes (NetPasses; see passes.hpp for the built-in ones):
//   parameter passes   NetParameter -> NetParameter, before any layer exists: upgrade_legacy (Caffe's V0 and
//                      V1 nets, deprecated fields; net/upgrade.hpp), filter (phase, level, stages),
//                      upgrade_inputs (net-level `input` fields -> an Input layer), insert_splits (a Split
//                      layer for every blob read more than once)
//   construction       create each layer with its engine (LayerRegistry), wire blobs by name (in place where
//                      top == bottom), set it up (shapes flow from the inputs), record in its plan step the tops
//                      that view bottoms and the layer's internal blobs, collect and share learnable parameters
//   after-build passes over the built plan: decide_backward (which steps run backward, and to which bottoms),
//                      plan_layouts
//   after-weights      over the plan once weights are loaded (RunAfterWeightsPasses; inference tools call it,
//                      training never does): the inference rewrites of a net that runs forward only (net/fold.hpp:
//                      BatchNorm and Scale folded into convolutions, activations fused, identities dropped)
// The result is `plan()`: an ordered list of steps, each naming the layer, the blobs it reads and writes, the
// tops that are views of its bottoms, and its internal blobs. Forward runs the steps in order, Backward in
// reverse. Steps and layers are two lists (a pass may remove or reorder steps); every table taken from the steps
// is derived again after each pass (DeriveStepTables). Layers never see the net; the net never sees a solver.
//
// Shapes flow: before a step runs forward, the net compares each bottom's shape and storage with those the
// step was last reshaped for, and only when something changed re-makes the step's views and re-runs its
// layer's Reshape. So reshaping an input (or a Data layer producing another batch shape) reshapes every
// later step on the next Forward, and costs a comparison per step when nothing changed.
//
// Memory the plan sees: every blob (tops, internal blobs), the views between them, and one workspace (scratch
// for one layer call at a time) sized to the largest request of any step. Once built, the net plans that memory
// (net/memory_plan.hpp): buffers whose lifetimes do not overlap share one arena, for a forward and backward pass
// in a TRAIN net (or one with force_backward), for forward alone otherwise, and each step's workspace is a slot of
// that arena, live where the step runs; see PlanMemory.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "layers/layer.hpp"
#include "net/lanes.hpp"
#include "net/schedule.hpp"
#include "net/streams.hpp"

namespace crema {

// What a step was last reshaped for: one bottom's shape and storage (the memory objects behind its values and
// gradients, and where in them the blob starts), compared by identity, never by content.
struct BlobSignature {
  std::vector<int> shape;
  const void* data_memory;
  size_t data_offset;
  const void* diff_memory;
  size_t diff_offset;
  // Whether `blob` still has this shape and storage (no copy: this runs before every step of every Forward).
  bool Matches(const Blob& blob) const;
  static BlobSignature Of(const Blob& blob);
};

// One step of the plan. Steps and layers are separate lists: a step names its layer, and a pass may remove,
// reorder or add steps, so a step's index in plan() is not its layer's index in layers().
struct PlanStep {
  int layer = -1;                     // index into layers()
  std::vector<int> bottoms;           // blob ids read
  std::vector<int> tops;              // blob ids written
  std::vector<Layer::TopView> views;  // tops that are views of bottoms (indices into tops / bottoms)
  std::vector<int> internals;         // blob ids of the layer's internal blobs (kept for backward)
  std::vector<bool> propagate_down;   // per bottom: compute its gradient
  bool needs_backward = false;
  std::vector<BlobSignature> reshaped_for;  // the bottoms as the step was last reshaped for
  bool reshape_pending = false;             // a pass changed what the layer was reshaped for (layouts)
};

class Net;
struct MemoryPlan;

// A pass over the NetParameter, before any layer exists.
struct ParameterPass {
  std::string name;
  std::function<NetParameter(const NetParameter&)> run;
};
// A pass over a built net (its plan, layers and blobs).
struct NetPass {
  std::string name;
  std::function<void(Net*)> run;
};
// The passes a net is built with, in order. NetPasses::Default() is what every tool uses; tests build with
// lists of their own to check one pass at a time.
struct NetPasses {
  std::vector<ParameterPass> parameter;
  std::vector<NetPass> after_build;  // over the built net, in order, before it first runs
  std::vector<NetPass> after_weights;
  static NetPasses Default();
};

class Net {
 public:
  // Builds the net for `param`'s own state (param.state()) on `context` (without one: a CPU context of its
  // own).
  explicit Net(const NetParameter& param, std::shared_ptr<Context> context = nullptr,
               const NetPasses& passes = NetPasses::Default());
  ~Net();
  // Reads a net definition (ReadNetDefinition: a prototxt, or a .caffemodel's own) and builds it for the given
  // phase, level and stages (overriding the file's state).
  Net(const std::string& path, Phase phase, int level = 0, const std::vector<std::string>& stages = {},
      std::shared_ptr<Context> context = nullptr);

  // Runs the plan forward; returns the weighted sum of the loss tops. Steps whose bottoms changed shape are
  // reshaped first.
  float Forward();
  // Reshapes every step whose bottoms changed since it was last reshaped (Forward does this step by step;
  // call it to see the new top shapes before running).
  void Reshape();
  // Runs one step of the plan (tools that time or inspect single steps use these).
  float ForwardStep(size_t step);
  // Execution lanes (net/lanes.hpp): how many steps of a pass may run at once (1: in order). Chosen when the net is
  // built: the context's (--lanes), else the net's `lanes` field, else automatic (up to four where there are two
  // to four OpenMP threads, each wide stretch timed both ways); on a GPU 1 unless asked for (lanes are the device's
  // streams there, net/streams.hpp: not yet run on a GPU), and 1 under debug_info (its lines follow the plan's order),
  // and in nets with a Python layer (the interpreter) or a layer whose tops' shapes follow its bottoms' values. Forward
  // and backward both run on lanes (backward in order under recompute, whose replays interleave with it); a step whose
  // results change with the thread count (Layer::ThreadCountChangesPass: oneDNN's weight gradients) runs alone on all
  // the threads, so the results are the in-order ones bit for bit. With lanes the memory plan shares bytes only between
  // buffers whose uses are ordered whatever runs at once (MemoryPlanOptions::concurrent).
  int lanes() const { return lanes_; }
  bool lanes_automatic() const { return lanes_automatic_; }
  // Sets the lanes (0: automatic, as when built) and plans the memory again for them.
  void set_lanes(int lanes);
  // The lanes' runners, forward and backward: what ran at once in the last recorded pass (crema time records one).
  StepLanes& step_lanes() { return step_lanes_; }
  StepLanes& backward_lanes() { return backward_lanes_; }
  // The plan step that lane step i of each pass runs (the lanes' order: ArrangeForLanes).
  int forward_lane_step(int i) const { return forward_steps_[i]; }
  int backward_lane_step(int i) const { return backward_steps_[i]; }
  // Whether the lanes are streams of a device (a GPU's, or their host rehearsal: Context::set_streams_on_host), and
  // the schedules of the last passes on them (steps numbered as the plan's, backward's as BackwardSteps).
  bool lanes_on_streams() const { return stream_device_ != nullptr; }
  const StreamSchedule& forward_streams() const { return forward_streams_; }
  const StreamSchedule& backward_streams() const { return backward_streams_; }
  const StreamDevice* stream_device() const { return stream_device_.get(); }
  void BackwardStep(size_t step);
  // Wall time of each step while on (the training monitor samples an iteration so): the milliseconds of its forward
  // and of its backward (replays under recompute included), summed since timing was turned on. On a GPU each
  // timed step waits for the device, so the figures are the step's own. Off by default; turning it on clears them.
  struct StepTimes {
    double forward_ms = 0, backward_ms = 0;
  };
  void set_step_timing(bool on);
  const std::vector<StepTimes>& step_times() const { return step_times_; }
  // Runs step `step`'s forward again, as a recompute schedule does before the backward of its segment
  // (Layer::Replay: the values the first run wrote, bit for bit).
  void ReplayStep(size_t step);
  // Runs the plan backward from the loss tops, accumulating into parameter gradients. Once every step that
  // uses a learnable parameter has run backward, the gradient-ready callback gets that parameter's index. Under a
  // recompute plan, each segment's replays run just before its backward (schedule()).
  void Backward();
  // Backward starts from each loss top's weight times `scale` (dynamic loss scaling, solver/loss_scaling.hpp), so
  // every gradient comes out `scale` times larger; 1 (the default) leaves them as they are. Forward and its loss are
  // unchanged.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  float loss_scale() const { return loss_scale_; }
  float ForwardBackward() {
    float loss = Forward();
    Backward();
    return loss;
  }
  // Sets every learnable parameter's gradient to zero.
  void ClearParamDiffs();
  // The same before a whole backward pass that nothing reads the gradients ahead of (the solver's iteration, crema
  // time's): on the host, a parameter only its own layer uses, whose backward runs and writes rather than adds where
  // asked (Layer::WritesZeroedParamGradients), is left for that backward to write (Layer::ZeroParamGradientInBackward);
  // until then its gradient holds the last values. Backward zeroes any such gradient no backward wrote after all
  // (ZeroPendingParamDiffs), and so does ClearParamDiffs.
  void ClearParamDiffsInBackward();
  void ZeroPendingParamDiffs();

  // A learnable parameter's gradient is complete, as the gradient-ready callback is told. In order and on CPU lanes
  // the callback runs once the step that completes it has run, and Then runs the work at once. On streams
  // (lanes_on_streams()) it runs when that step is queued, before the device has run it: Then queues the work on the
  // pass's side stream (SideStream) after an event recorded with the step, and the pass ends only once the work has
  // run, so what follows Backward on the context's stream (an update) sees it. Work that reads the gradient (an
  // all-reduce) goes through Then; read directly in the callback, a gradient on streams may not be there yet. The
  // work runs with the context's stream set to the side stream (Context::stream()).
  class GradientReady {
   public:
    int index() const { return index_; }  // into learnable_params()
    void Then(const std::function<void()>& work) const;

   private:
    friend class Net;
    GradientReady(int index, SideStream* side, int event) : index_(index), side_(side), event_(event) {}
    int index_;
    SideStream* side_;  // null: the gradient is complete now
    int event_;
  };
  // Data parallelism: called during Backward for each learnable parameter as soon as its gradient is complete, so an
  // all-reduce can overlap the rest of backward; one call at a time. Empty: none.
  void set_gradient_ready_callback(std::function<void(const GradientReady&)> callback);
  // The same given the parameter's index only (for work that needs no device order).
  void set_gradient_ready_callback(std::function<void(int)> callback);
  // The step after whose backward learnable parameter `index` is complete.
  int gradient_ready_step(int index) const { return gradient_ready_step_[index]; }

  // Runs the after-weights passes (inference tools call this once the weights are loaded); the tables derived
  // from the steps are derived again after each.
  void RunAfterWeightsPasses();

  // Copies parameters from a trained net (by layer name; shapes must match). Layers absent from this net
  // are skipped with a log line. An empty BlobProto (no shape, no values) stands for a parameter the file left
  // to its owner (Caffe's HDF5 files store a parameter shared by name once); it is accepted where this net
  // shares that parameter too. Returns the names of this net's layers that received parameters. Weights that
  // reach none of this net's layers with parameters (another net's, a net definition, nothing at all) are an
  // Error naming this net's layers with parameters and those the weights hold; a partial copy (fine-tuning) is
  // not.
  std::vector<std::string> CopyTrainedLayersFrom(const NetParameter& trained);
  // From a .caffemodel (binary), a .caffemodel.h5 (Caffe's HDF5 layout; any HDF5 file is read as one, whatever
  // its name) or, if the name ends in .prototxt/.txt, a text NetParameter. Errors name the file; a directory or
  // an empty file is refused as such.
  std::vector<std::string> CopyTrainedLayersFrom(const std::string& path);
  // The layers with parameters that none of `copied_layers` provided (fine-tuning: the layers that start from
  // their fillers). A layer whose parameters are all shared with a copied layer is not among them.
  std::vector<std::string> LayersNotCopied(const std::vector<std::string>& copied_layers) const;
  // Makes this net use `other`'s parameter memory for every layer present in both (test nets share the
  // training net's weights this way).
  void ShareTrainedLayersWith(const Net& other);
  // The net's layers with their parameters, as written to a .caffemodel.
  void ToProto(NetParameter* param, bool write_diff = false) const;

  // Runtime state of every layer that has one (data cursors, random streams), tagged with `net_name`.
  void SaveRuntimeState(const std::string& net_name, SolverState* state) const;
  void RestoreRuntimeState(const std::string& net_name, const SolverState& state);

  const std::string& name() const { return name_; }
  Phase phase() const { return phase_; }
  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& shared_context() const { return context_; }
  bool force_backward() const { return force_backward_; }
  const std::vector<PlanStep>& plan() const { return plan_; }
  // For after-build passes.
  std::vector<PlanStep>& mutable_plan() { return plan_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  // Every blob the steps read and write (inputs, activations, labels, losses) and the layers' internal blobs,
  // indexed by blob id; a layer's learned parameters are Layer::params(), never among them.
  const std::vector<std::shared_ptr<Blob>>& blobs() const { return blobs_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  bool has_layer(const std::string& name) const { return layer_index_.count(name) > 0; }
  // Throw crema::Error naming the missing blob or layer.
  Blob* blob_by_name(const std::string& name) const;
  Layer* layer_by_name(const std::string& name) const;
  // The name a user gave the blob `name`: the blob it copies when it is a copy made by an added Split layer
  // (data_data_0_split_1 is 'data'), else `name`. Errors name blobs so.
  std::string UserBlobName(std::string name) const;
  // Tops of Input layers, and blobs that no layer reads.
  const std::vector<Blob*>& input_blobs() const { return input_blobs_; }
  const std::vector<int>& output_blob_indices() const { return output_blob_indices_; }
  float blob_loss_weight(int blob_id) const { return blob_loss_weights_[blob_id]; }

  // The parameters a solver updates (one entry per shared group), with their multipliers.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }

  // Debugging aid (the solver's debug_info; on from the start where NetParameter.debug_info is set): while on,
  // Forward logs each step's mean absolute top values and parameter values, Backward each step's mean absolute
  // bottom and parameter gradients and then the norms of all parameters, in Caffe's line shapes
  // ("    [Forward] Layer conv1, top blob conv1 data: 0.0123").
  void set_debug_info(bool on) { debug_info_ = on; }
  bool debug_info() const { return debug_info_; }
  // Non-finite checks (on for the net's whole life where NetParameter.debug_info is set; the solver's per-iteration
  // set_debug_info leaves them alone): after each forward step its tops, after each backward step the gradients
  // of its bottoms and parameters are checked, and the first NaN or infinity is an Error naming the layer, the
  // blob, the element and the value (DescribeNonFinite).
  void set_check_finite(bool on) { check_finite_ = on; }
  bool check_finite() const { return check_finite_; }
  // Whether some top carries a loss weight (a loss layer, or loss_weight on another layer): a net to train needs one.
  bool has_loss() const;
  // Learnable parameter `index`'s layer (the one that owns it) and its name there: the ParamSpec's name, or its
  // position in the layer ("0", "1"), as Caffe's logs show it.
  const std::string& learnable_param_layer(int index) const {
    return layer_names_[learnable_param_owner_[index].first];
  }
  std::string learnable_param_display_name(int index) const;

  // After a forward that produced a non-finite loss: names the first layer and top that hold a NaN or an
  // infinity ("" when every top is finite).
  std::string DescribeFirstNonFinite() const;
  // The first NaN or infinity of one step: in its tops, or (`gradients`) in the gradients of its bottoms and
  // parameters after its backward; "layer 'L' (TYPE) produced nan in top 'B' SHAPE at element I", or "".
  std::string DescribeNonFinite(size_t step, bool gradients) const;

  // The memory plan (net/memory_plan.hpp). A net plans its memory once built, unless its prototxt says
  // `memory_plan: NONE`, its context turns plans off (--memory_plan=none), it logs debug_info, or a layer's tops
  // follow its bottoms' values (Filter): for a forward and backward pass where some step runs backward, for forward
  // alone otherwise. Then the values of a blob are readable after Forward only while a later buffer has not reused
  // its memory: the net's inputs, outputs, and the blobs KeepBlobs names always are. A new input shape (Reshape,
  // Forward) plans again; a shape that changes in the middle of a pass (a data layer's) turns the plan off for the
  // net's life.
  // Plans again for a forward and backward pass, or for forward alone: what runs a net only forward (crema test,
  // classify, extract_features, time --forward_only, a solver's test nets) says so, and the net then frees every
  // activation after its last reader (under a plan), tells its layers (Layer::set_backward_planned) and refuses
  // Backward.
  void PlanMemory(bool with_backward);
  // Plans a training pass with recompute over segments beginning at the given steps (each one of SegmentCuts(),
  // ascending), replaying what the net's recompute settings allow (net/schedule.hpp: RecomputableSteps), instead of
  // the segments the planner would choose; empty: the planner chooses again. For tests and for users who place the
  // segments themselves.
  void RecomputeSegments(const std::vector<int>& segments);
  // Keeps the named blobs readable (memory of their own) and plans again; a name the net lacks is an Error.
  void KeepBlobs(const std::vector<std::string>& names);
  // Gives every planned buffer memory of its own again (as with memory_plan: NONE), for the net's life.
  void UnplanMemory();
  // The plan in force; null when the net has none.
  const MemoryPlan* memory_plan() const { return memory_plan_.get(); }
  // The order a pass runs the steps in (net/schedule.hpp): with replays where the plan recomputes (memory_plan:
  // RECOMPUTE, a layer's recompute mark, --memory_plan=recompute), which Backward follows; else the plain one.
  PassSchedule schedule() const;

  // Bytes of the data of every blob of the plan (tops and internal blobs), each storage counted once.
  size_t activation_bytes() const;
  // What the layers hold outside the plan for as long as they live (Layer::HeldBuffers: batches read ahead, weights
  // reordered for an engine), each with the index of its layer, largest first.
  struct HeldBuffer {
    int layer;
    Layer::HeldBuffer buffer;
  };
  std::vector<HeldBuffer> HeldBuffers() const;
  // Bytes of the shared workspace (under a memory plan each step's workspace is a slot of the arena instead, and the
  // shared one is empty unless a request outgrew its slot).
  size_t workspace_bytes() const { return static_cast<size_t>(workspace_->count()) * sizeof(float); }

  // The names of the passes this net was built with, in the order they ran.
  const std::vector<std::string>& passes_run() const { return passes_run_; }

  // Rewriting the plan (the inference rewrites of net/fold.hpp use these; steps and layers stay two lists).
  // Whether the net runs forward only: no step runs backward, or whoever runs it said so (PlanMemory(false)).
  bool forward_only() const { return !plan_with_backward_; }
  // Whether the inference rewrites may run: the net's `fold` field and its context's setting (--fold).
  bool fold_allowed() const { return fold_ && context_->fold(); }
  // Whether blob `id`'s values are read from outside the plan after a forward pass: the net's outputs, the blobs
  // KeepBlobs named, and, in a net without a memory plan, every blob (each keeps its values for whoever reads it, as
  // in Caffe). A rewrite never leaves such a blob unwritten or changes what it holds.
  bool BlobReadOutside(int id) const;
  // Replaces step `step`'s layer with a new one built from `param` (without its blobs; the registry picks the engine
  // for the step's bottoms as for any layer), which `prepare` configures before it is set up over the step's bottoms
  // and `tops`. The step then runs forward only. The replaced layer stays in layers() with its parameters, which
  // weight files read and write and Python shows; the new one stands for it (rewrite_of), under its name, and is never
  // written to a file. Returns the new layer's index.
  int ReplaceStepLayer(size_t step, LayerParameter param, const std::vector<int>& tops,
                       const std::function<void(Layer&)>& prepare);
  // The layer that layer `layer` stands for: the replaced one for a rewritten layer, else `layer` itself.
  int rewrite_of(int layer) const { return rewrite_of_[layer]; }
  // Parameters derived from others (weights with a BatchNorm folded in): `derive` computes layer `layer`'s from
  // `sources` now, and again before the layer's step runs forward whenever the data of a source may have changed
  // since (Blob::data_version: Python's edits, other weights copied in).
  void AddDerivedParams(int layer, std::vector<const Blob*> sources, std::function<void()> derive);
  // Layer `layer`'s step now also computes the gradients of layer `from`'s learnable parameters (a training fusion
  // gave it `from`'s work): a gradient is complete once the earliest step computing it has run backward.
  void TakeOverParams(int layer, int from);
  // Removes step `step` from the plan (its layer stays in layers()).
  void RemoveStep(size_t step);
  // Later steps (after `step`) read blob `to` where they read `from`.
  void RedirectReads(size_t step, int from, int to);
  // Step `step` writes its top `top`, in place on one of its bottoms, into a new blob of its own instead (its shape and
  // layout, named "<blob>@<layer>", errors naming it as the blob), which the later steps read and write where they
  // read and wrote the old one; the step and those that read the new blob are reshaped before they run again. For a
  // blob not read from outside (BlobReadOutside), whose layer may leave its place (Layer::MayLeavePlace). Returns the
  // new blob's id.
  int UntieInPlaceTop(size_t step, int top);
  // Gives every blob that no step reads or writes any more, and that is not read from outside (BlobReadOutside),
  // new storage of its shape, allocated only if something touches it: the memory of the values a rewrite no longer
  // computes goes, and no such blob views another's memory. Returns how many blobs it gave new storage.
  int DropBlobsNoStepUses();
  // What the rewrites did, a line for each rewritten step ("conv1 [onednn]: folded bn1, scale1; fused relu1 (ReLU)"):
  // crema time lists them, Python shows them as Net.rewrites.
  void RecordRewrite(std::string note) { rewrites_.push_back(std::move(note)); }
  // A rewrite for training (net/fuse.hpp): listed with the others, but the net still runs backward.
  void RecordTrainingRewrite(std::string note) {
    rewrites_.push_back(std::move(note));
    ++training_rewrites_;
  }
  const std::vector<std::string>& rewrites() const { return rewrites_; }
  // The layers whose steps a rewritten layer took over (folded and fused into it), in order: what a folded net
  // written as plain layers (FoldedNetParameter) needs to say it again.
  void SetAbsorbed(int layer, std::vector<int> absorbed) { absorbed_[layer] = std::move(absorbed); }
  const std::vector<int>& absorbed(int layer) const { return absorbed_[layer]; }

 private:
  // Zeroes learnable parameter `index`'s gradient now, taking any mark ClearParamDiffsInBackward left on its layer.
  void ZeroParamDiff(size_t index);
  void Build(const NetParameter& param, const NetPasses& passes);
  // CopyTrainedLayersFrom's copy, without the check that something was copied.
  std::vector<std::string> CopyMatchingLayers(const NetParameter& trained);
  int AddTop(const LayerParameter& layer_param, int top_index, std::vector<int>* step_tops,
             const std::vector<int>& step_bottoms);
  // Per layer, once: the learnable parameters (sharing by ParamSpec name), their multipliers and owners.
  void CollectParams();
  // Every table the net derives from its steps (inputs, outputs, loss weights, the step after whose backward
  // each parameter's gradient is complete), from plan_ as it is now: run after construction and after every
  // pass, so a pass that removes, adds or reorders steps leaves them true.
  void DeriveStepTables();
  void FindOutputs();
  // Records layer `index` (named layer_names_[index]) in layer_index_; a second layer of a name is accepted with a
  // warning unless both hold parameters or saved state, which a name would no longer tell apart.
  void IndexLayerName(int index, Layer& layer);
  // Re-makes the step's views and re-runs its layer's Reshape when its bottoms changed.
  void ReshapeStep(size_t step);
  // Lists the internal blobs of `layer` (just set up for `step`) among the net's blobs and in the step.
  void RegisterInternalBlobs(const Layer& layer, PlanStep* step);
  // Runs the derivation of layer `layer`'s parameters again where a source changed (AddDerivedParams).
  void RefreshDerivedParams(int layer);
  // ReshapeStep for every step in order; with `every`, each is reshaped whether or not its bottoms changed (their
  // storage moved: the memory plan's binding and release).
  void ReshapeSteps(bool every);
  // Whether step `step`'s bottoms changed shape or storage since it was last reshaped (ReshapeStep would act).
  bool StepNeedsReshape(size_t step) const;
  // Forward of step `step` as reshaped already.
  float RunForwardStep(size_t step);
  // Forward on the lanes: reshapes every step first, then runs the steps through step_lanes_; a step whose bottoms
  // changed shape mid-pass (a data layer's new batch shape) stops the lanes and the rest runs in order.
  float ForwardOnLanes();
  // Backward on the lanes (not under recompute): every step that runs backward, through backward_lanes_.
  void BackwardOnLanes();
  // The same on a device's streams: every step queued at once, in the plan's order (backward: BackwardSteps), on
  // the streams of its schedule, steps that wait for each other ordered by events.
  float ForwardOnStreams();
  void BackwardOnStreams();
  // Backward of one step, without the gradient hooks (BackwardStep runs both).
  void RunBackwardStep(size_t step);
  // The gradient hooks of the parameters complete after `step`: now (`side` null), or on streams after `event`.
  void FireGradientHooks(size_t step, SideStream* side = nullptr, int event = -1);
  // After backward on lanes or streams: the gradient hooks of steps that run no backward (complete from the start).
  void FireHooksOfStepsWithoutBackward(SideStream* side = nullptr);
  // Makes every storage the steps touch (SyncedMemory makes it on first use: two lanes must not both make one): the
  // data, and with `gradients` the gradients too.
  void MakeStepStorage(bool gradients);
  // The lanes' graphs no longer hold (memory or shapes moved): both are made again before their next pass.
  void InvalidateLanes() {
    step_lanes_.Invalidate();
    backward_lanes_.Invalidate();
    forward_streams_ = backward_streams_ = StreamSchedule();
  }
  // The lanes this net runs with, from the request (0: automatic) and what the net holds.
  // Says which layers compute their products in a precision other than float32, and which that asked for one do not
  // (nothing where none asked).
  void LogPrecisions() const;
  float loss_scale_ = 1.f;
  void ChooseLanes(int requested);
  std::vector<Blob*> Blobs(const std::vector<int>& ids) const;
  std::string ParamDisplayName(int layer, int param) const;
  // Plans with the current options (kept blobs, plan_with_backward_) and binds the plan: every planned buffer's
  // owner becomes a view of the arena, and every step is reshaped so views and layers see the new storage.
  void BindMemoryPlan();
  // Gives the planned buffers memory of their own (copying their values when `keep_values`: a pass is under way);
  // with `reshape`, tells the layers backward may run again (unless a pass is under way) and reshapes every step
  // (a replan leaves that to BindMemoryPlan).
  void ReleaseMemoryPlan(bool keep_values, bool reshape);
  // Tells every layer whether Backward may follow Forward (Layer::set_backward_planned); where that changes, every
  // step is marked to be reshaped.
  void TellLayersBackwardPlanned(bool planned);
  // The plan for a pass with backward: with recompute where the net, a layer or the context asks for it.
  MemoryPlan ChoosePlan();
  // Under a plan with backward: where a layer in place would copy its input for its backward and the step that
  // wrote that input keeps the same values until its own, later, backward (Layer::KeptTop: BatchNorm's normalized
  // values before a Scale), the layer reads those instead (Layer::BorrowKeptInput). `share` false undoes it.
  // Returns how many layers borrow.
  int ShareKeptInputs(bool share);
  // Before a pass: plans again when the inputs' shapes changed since the plan was made.
  void ReplanIfInputsChanged();
  void ForwardDebugInfo(size_t step) const;
  void BackwardDebugInfo(size_t step) const;
  // " [bottom shapes: 'data' 2 3 8 8 (384), ...]" for the blobs of ids `bottoms`, named as the user named them;
  // "" for none. Shape errors end with it.
  std::string BottomShapesNote(const std::vector<int>& bottoms) const;

  std::shared_ptr<Context> context_;
  std::string origin_;  // the prototxt the net was read from, for messages ("" when built from a NetParameter)
  std::string name_;
  Phase phase_ = TEST;
  bool force_backward_ = false;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_index_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_index_;
  // The tops of the Split layers the passes added, each mapped to the blob it copies.
  std::map<std::string, std::string> split_sources_;
  std::vector<float> blob_loss_weights_;
  std::vector<PlanStep> plan_;
  std::vector<bool> added_by_pass_;  // per layer: not in the prototxt (a Split, say), not written to .caffemodel
  std::shared_ptr<Blob> workspace_;
  std::vector<NetPass> after_weights_;
  // The rewrites: per layer, the layer it stands for (itself for the prototxt's and the Splits); the derived
  // parameters, each with the versions of its sources it was derived from; per layer, its derivation (-1: none).
  size_t training_rewrites_ = 0;  // of rewrites_, those for training
  std::vector<int> rewrite_of_;
  std::vector<std::vector<int>> absorbed_;  // per layer: SetAbsorbed's
  struct DerivedParams {
    std::vector<const Blob*> sources;
    std::vector<uint64_t> versions;
    std::function<void()> derive;
  };
  std::vector<DerivedParams> derived_;
  std::vector<int> derived_of_layer_;
  std::vector<std::string> rewrites_;
  bool fold_ = true;  // NetParameter.fold
  std::vector<std::string> passes_run_;
  std::function<void(const GradientReady&)> gradient_ready_;
  std::vector<int> gradient_ready_step_;              // per learnable parameter
  std::vector<std::vector<int>> params_ready_after_;  // per step: learnable parameters complete after it
  std::vector<Blob*> input_blobs_;
  std::vector<int> output_blob_indices_;
  std::vector<Blob*> learnable_params_;
  std::vector<float> params_lr_;
  std::vector<float> params_weight_decay_;
  std::vector<std::pair<int, int>> learnable_param_owner_;  // per learnable parameter: (layer, index in the layer)
  std::vector<std::vector<int>> layer_learnable_params_;    // per layer, per parameter: its learnable index
  bool debug_info_ = false;
  bool check_finite_ = false;
  bool step_timing_ = false;
  std::vector<StepTimes> step_times_;
  // set_step_timing's clock around one step.
  struct StepTimer {
    Net* net;
    bool running;
    std::chrono::steady_clock::time_point start;
    double Stop();  // the milliseconds since start (after the device's work), 0 when not running
  };
  StepTimer StartStepTimer();
  // The memory plan: wanted unless turned off; the plan bound now (null: none), its arena, what it keeps, and the
  // input shapes it was made for.
  bool plan_memory_ = false;
  bool plan_with_backward_ = false;
  bool recompute_ = false;               // memory_plan: RECOMPUTE (or the context's --memory_plan=recompute)
  size_t memory_budget_ = 0;             // NetParameter.memory_budget
  PassSchedule schedule_;                // of the plan bound (kept while a pass that began under it runs on)
  std::vector<int> chosen_segments_;     // RecomputeSegments'
  std::vector<std::shared_ptr<Blob>> layer_workspaces_;  // per layer: its slot of the arena (null: the shared one)
  bool layers_backward_planned_ = true;  // what the layers were last told
  std::set<int> kept_blobs_;
  std::unique_ptr<MemoryPlan> memory_plan_;
  std::shared_ptr<SyncedMemory> arena_;
  std::vector<std::vector<int>> planned_input_shapes_;
  std::vector<bool> reused_in_forward_;  // per blob id: its data's memory is reused later in forward
  int lanes_ = 1;
  bool lanes_automatic_ = false;
  int lanes_requested_ = 0;  // the net's field, or 0
  StepLanes step_lanes_;     // prepared over the forward step graph; invalidated whenever memory or shapes move
  StepLanes backward_lanes_;                         // over the backward step graph, likewise
  std::vector<int> forward_steps_, backward_steps_;  // the plan step of each lane step, per pass
  std::unique_ptr<StreamDevice> stream_device_;      // lanes on streams: the device's, or rehearsed; else null
  StreamSchedule forward_streams_, backward_streams_;  // empty until made (InvalidateLanes empties them)
  std::mutex gradient_ready_mutex_;  // gradient hooks fire one at a time, from whichever lane finished the step
};

// The net definition in `path`: a prototxt, or the one a .caffemodel carries beside its weights (crema's and
// Caffe's hold every layer's whole parameters). From a .caffemodel the blobs go, and so does what placed its layers
// in the net that wrote it (phase, include and exclude rules): its layers are the net. HDF5 weights hold no
// definition, which the error says.
NetParameter ReadNetDefinition(const std::string& path);

}  // namespace crema
