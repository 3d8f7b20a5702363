// The layer contract. A layer reads its bottom blobs and writes its top blobs in Forward, and turns top
// gradients into bottom (and parameter) gradients in Backward. It knows nothing of nets or solvers; what it
// needs from its surroundings comes through its Context (device, random seed, replica, GPU handles).
//
// A concrete layer:
//   - declares its arity (ExactNumBottomBlobs() etc.); the base class checks it once in SetUp;
//   - checks its parameters in LayerSetUp (naming the layer and field in any error) and creates its
//     parameter blobs there;
//   - computes its top shapes in Reshape, which runs at set-up and whenever a bottom's shape (or storage)
//     changes: the net re-runs it before Forward then, and only then;
//   - declares the memory it needs, so that the net's plan sees every buffer: TopViews (a top that is a view
//     of a bottom: Flatten, Split), AddInternalBlob (kept from Forward to Backward: pooling's argmax) and
//     RequestWorkspace (scratch for one call: im2col columns; one workspace serves every layer of a net);
//   - implements Forward_cpu / Backward_cpu, and Forward_gpu / Backward_gpu when it has GPU code (the engine's
//     registration says which devices it runs on, so a net never picks it for another); or, when the same
//     code serves both devices, derives from BothDevices<Base> and implements Forward_any / Backward_any.
// Layers made of per-element rules derive from NeuronLayer and write their Forward and Backward once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/common.hpp"
#include "core/context.hpp"
#include "core/elementwise.hpp"
#include "core/half_products.hpp"
#include "core/random.hpp"

namespace crema {

// A label value as Caffe reads it: truncated toward zero (2.7 is class 2), also before it is compared with an
// ignore_label. Rules read only labels that Layer::CheckLabels accepted on the host, so the conversion is defined.
CREMA_HOST_DEVICE inline int LabelClass(float value) { return static_cast<int>(value); }

// A layer's QuantizationParameter (its 8-bit input, or an Eltwise's summand) as a Quantization; throws an Error naming
// `who` where its input_scale is not a positive number.
Quantization QuantizationOf(const QuantizationParameter& q, const std::string& who);

// An element rule a layer applies to its own output before writing it: the inference rewrites (net/fold.hpp) fuse a
// ReLU, ELU, Sigmoid, TanH or Clip into the Convolution, Deconvolution or InnerProduct before it, whose engine then
// computes it in the same pass (oneDNN's post-ops) or right after its own work (the other engines).
struct FusedActivation {
  enum Kind { kNone, kReLU, kELU, kSigmoid, kTanH, kClip };
  Kind kind = kNone;
  float alpha = 0.f;  // ReLU: the negative slope; ELU: alpha; Clip: the minimum
  float beta = 0.f;   // Clip: the maximum
  // "ReLU", "ELU(alpha 1)", ...: what crema time lists.
  std::string describe() const;
};

// The schema's Precision (a solver's or a layer's `precision`) as crema's.
Precision SchemaPrecision(::caffe::Precision precision);

class Layer {
 public:
  // Without a context, the layer gets one of its own: the CPU, seed 1701 (tests, standalone use).
  explicit Layer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks arity, runs LayerSetUp and Reshape, and records the loss weights of the tops.
  void SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  virtual void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {}
  virtual void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  // Reshape over a step's bottoms, the summand of a fused sum among them (last): the engine sees it as summand_ while
  // it reshapes (its element type may decide the primitive), Reshape the layer's own bottoms.
  void ReshapeAll(const std::vector<Blob*>& all_bottoms, const std::vector<Blob*>& top);

  // Runs the forward pass on the context's device and returns the weighted loss of the tops.
  float Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom);

  virtual const char* type() const = 0;
  // The engine this layer is (LayerRegistry sets it; "" for a layer made directly).
  const std::string& engine() const { return engine_; }
  void set_engine(const std::string& engine) { engine_ = engine; }
  // How the engine computes, where that is worth saying beside its name ("8-bit integers", "Winograd"; "" for
  // nothing to say), for `crema time`'s list of engines.
  virtual std::string engine_note() const { return ""; }
  // The precision asked of this layer's products: its own `precision`, else its context's (the solver's, --precision).
  Precision requested_precision() const;
  // The precision its products compute in, as its engine was set up (Reshape): float32 unless the engine has kernels
  // for the one requested on this machine. Net::Init lists the layers that compute in another one, and those asked
  // for one that compute in float32.
  virtual Precision computes_in() const { return Precision::kFloat32; }
  const std::string& name() const { return param_.name(); }
  Context& context() const { return *context_; }
  Device device() const { return context_->device(); }
  const LayerParameter& layer_param() const { return param_; }
  Phase phase() const { return param_.phase(); }

  // Learned parameters (weights, biases): what Caffe calls a layer's blobs, and what a .caffemodel holds as a
  // layer's `blobs`.
  std::vector<std::shared_ptr<Blob>>& params() { return params_; }
  const std::vector<std::shared_ptr<Blob>>& params() const { return params_; }

  // Floating-point operations (a multiply-add counts two) of one Forward, and of one Backward that computes
  // the parameter gradients the layer learns and the bottom gradients `propagate_down` asks for, at the
  // current shapes. Layers whose work is matrix products count it (crema time reports GFLOP/s and the share of
  // the machine's GEMM peak from it); 0 for the others.
  virtual double ForwardFlops() const { return 0; }
  virtual double BackwardFlops(const std::vector<bool>& propagate_down) const { return 0; }

  // Writes the layer's parameter and its blobs (with diffs if asked) for a .caffemodel.
  virtual void ToProto(LayerParameter* param, bool write_diff = false) const;

  // Declared arity; -1 means "no constraint".
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, the net creates anonymous tops up to MinTopBlobs/ExactNumTopBlobs if fewer are named.
  virtual bool AutoTopBlobs() const { return false; }
  // Whether force_backward may ask for the gradient of this bottom (false for labels, say).
  virtual bool AllowForceBackward(int bottom_index) const { return true; }
  // Whether top i may be the same blob as bottom i (in-place execution).
  virtual bool AllowsInPlace() const { return false; }
  // Whether the memory plan may run the layer in place where the prototxt does not: top i written into the memory
  // of bottom i (another blob object) when no later reader needs that bottom. Layers that allow in place do,
  // unless their forward is a user's code that may read its input after writing its output (Python).
  virtual bool PlanMayRunInPlace() const { return AllowsInPlace(); }
  // What Backward reads, besides the top gradients, the parameters and the layer's internal blobs, when the layer
  // runs out of place: the data of bottom `bottom`, the data of top `top`. A buffer that no later step and no
  // backward reads need not be kept (the memory planner's lifetimes). The defaults, everything read, are always
  // safe; a layer declares less only where its backward (every engine's: an engine inherits its base's answer)
  // provably reads less, which GpuConformanceTest.BackwardReadsOnlyWhatItDeclares checks on every case. In
  // place, the one blob holds the top, and a layer that needs its input keeps it (KeepInputWhenInPlace).
  virtual bool BackwardReadsBottom(int bottom) const { return true; }
  virtual bool BackwardReadsTop(int top) const { return true; }
  // In place (top `index` and bottom `index` one blob, which holds the top after Forward): whether Backward reads
  // that blob's data. By default where it reads the top, or the bottom without keeping a copy of it (ReLU reads its
  // output as its input). A layer that keeps its input when in place (KeepInputWhenInPlace, Scale, oneDNN's and
  // cuDNN's BatchNorm) reads the copy, and the blob only where it reads its top: the planner may then give the
  // blob's memory to others once the later layers are done with it.
  virtual bool BackwardReadsInPlace(int index) const;
  // An internal blob that holds, unchanged from this layer's Forward until its Backward, exactly the values Forward
  // wrote to top `top` (BatchNorm's normalized values, where it keeps them), else nullptr. A later layer running in
  // place on that top, which would keep a copy of its input for its backward, reads this blob instead
  // (BorrowKeptInput, from the net's share_kept_inputs pass).
  virtual const Blob* KeptTop(int top) const { return nullptr; }
  // In place, where the layer keeps a copy of its input for backward (KeepInputWhenInPlace): reads `source`
  // instead, which the caller guarantees holds the input's values from this layer's Forward until its Backward;
  // the copy then takes no memory. nullptr goes back to copying (from the next Reshape). False, and nothing
  // changes, where the layer keeps no copy.
  bool BorrowKeptInput(const Blob* source, const std::string& source_name);
  // Recompute (net/schedule.hpp): whether Forward may run a second time between this pass's Forward and Backward
  // (Replay) and write bit for bit what the first run wrote, leaving the layer as the first run left it. By default
  // where no internal blob carries values from one pass into the next (recurrent layers' state); a layer whose
  // forward has effects outside its tops (files, Python code) says no.
  virtual bool Replayable() const;
  // Whether Forward changes parameters (BatchNorm's running statistics, in training): Replay puts them back.
  virtual bool ForwardUpdatesParams() const { return false; }
  // Whether the results of the layer's forward (`backward` false) or backward pass may change with the number of
  // threads it runs on: where an engine splits one sum over the threads and adds the parts (oneDNN's weight
  // gradients and batch statistics, matrix products that split their inner dimension). On execution lanes such a
  // pass runs alone on all the threads, as in order; every other may run on a lane's one thread, with primitives
  // made for all of them (a kernel that splits a sum may even wait there for threads that never come). By default
  // a layer with parameters says so of its backward (their gradients are sums over the batch); a layer says no only
  // where every sum runs on one thread whatever the count, which GpuConformanceTest.OneThreadGivesAllThreadsResults
  // WhereDeclared checks on every case and CPU engine.
  virtual bool ThreadCountChangesPass(bool backward) const { return backward && !params_.empty(); }
  // Before a Forward that Replay may repeat: remembers the random stream as it is (Dropout's mask, stochastic
  // pooling's picks: the replay draws the same numbers).
  void PrepareReplay();
  // Runs Forward again as the Forward after PrepareReplay ran: the same random numbers, and parameters that Forward
  // updates as that run left them.
  void Replay(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  // Whether the tops are the net's inputs, filled by the caller (Input).
  virtual bool TopsAreNetInputs() const { return false; }
  // Whether the tops' shapes depend on the bottoms' values, not only on their shapes (Filter keeps the items its
  // selector picks): the net then re-runs Reshape before every forward pass of the layer.
  virtual bool ReshapesOnData() const { return false; }

  // Layouts (core/layout.hpp). The net's plan_layouts pass keeps a blob in a layout other than plain only when its
  // writer offers that layout and every layer that reads it takes it; the layers then find the layouts on their
  // blobs (Blob::layout()) when the net reshapes them, and read and write data and gradients in them.
  // Whether bottom `bottom` may come in `layout` (data read, gradient written in it): plain only, by default.
  virtual bool ReadsLayout(int bottom, Layout layout) const { return layout == Layout::kPlain; }
  // The layout this layer would write top `top` in, given its bottoms' layouts, where the readers take it: plain
  // by default; the arrangement its engine works in (oneDNN's convolution), or the bottom's (pooling, ReLU).
  virtual Layout OffersLayout(int top, const std::vector<Layout>& bottom_layouts) const { return Layout::kPlain; }
  // Whether the layer writes its top in its bottom's layout and cannot reorder (native loops that take any
  // layout: ReLU, Scale). Out of place, such a layer takes a layout only where its top can stay in it too; the
  // pass then keeps both (oneDNN's engines reorder a top that stays plain themselves).
  virtual bool PassesLayoutThrough() const { return false; }

  // Element types (core/element_type.hpp). The net's plan_element_types pass keeps a blob in 8-bit integers or bf16
  // only when its writer can write them and every layer that reads it converts it the same way; the layers find the
  // type on their blobs (Blob::quantization()) when the net reshapes them. How this layer converts bottom `bottom`
  // before computing on it (QuantizationParameter: the type and scale of its 8-bit kernels' input; bf16 where its
  // products read bf16), or floats where it reads floats (the default). A layer that says so must read the bottom in
  // that type as it lies, converted already.
  virtual Quantization ReadsQuantized(int bottom) const { return {}; }
  // Whether this layer reads bottom `bottom` in whatever element type and scale it lies in, and computes with its
  // values as they stand for (an 8-bit engine's fused sum: its summand, any type, scaled into the output's). Such a
  // reader does not keep a blob in floats, and its ReadsQuantized is an offer, taken where no other reader quantizes
  // the blob (a blob only such readers read, offering none or differing, stays in floats).
  virtual bool ReadsAnyQuantization(int bottom) const { return false; }
  // Whether this layer can write top `top` in element type `type` (an 8-bit type, in any scale; bf16), the values it
  // would have written in float, rounded (and saturated: q = round(value * scale)).
  virtual bool WritesQuantized(int top, ElementType type) const { return false; }
  // Whether this layer, set up in place on top `top`, may be given a top of its own (Net::UntieInPlaceTop) and then
  // runs out of place from its next Reshape on: plan_element_types gives it one where it writes that top in another
  // type (WritesQuantized, asked of it in place as of the layer it would then be) for all the steps that read it.
  virtual bool MayLeavePlace(int top) const { return false; }
  // Gradients in bf16 (Blob::diff_type; plan_element_types plans them too). Whether this layer's backward, computing
  // the bottoms' gradients `propagate_down` asks for, reads top `top`'s gradient only rounded to bf16, as ToBfloat16
  // rounds (a convolution computing in bf16 converts its output gradient so): the gradient may then lie in bf16,
  // written so by the step that reads the top.
  virtual bool ReadsTopDiffInBfloat16(int top, const std::vector<bool>& propagate_down) const { return false; }
  // Whether this layer's backward can write bottom `bottom`'s gradient in bf16 (the floats it would have written,
  // rounded), where the bottom's writer reads it so.
  virtual bool WritesBottomDiffInBfloat16(int bottom) const { return false; }
  // Whether this layer's tops hold some of its bottoms' values, unchanged (a MAX pooling, a Concat), and it can pass
  // them in 8 bits or bf16 as they come (8 bits run forward only; bf16 in training too where the layer can): its
  // bottoms and tops then take one element type together.
  virtual bool PassesQuantizationThrough() const { return false; }

  // A top that is a view of a bottom: the same data (and diff, when `diff`), moved by no one. The net (or
  // SetUp, for a layer on its own) makes the view before Reshape, which then only sets the top's shape; the
  // count must stay the bottom's.
  struct TopView {
    int top;
    int bottom;
    bool diff;
  };
  virtual std::vector<TopView> TopViews(int num_tops) const { return {}; }
  // Makes the views TopViews declares.
  void MakeTopViews(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;

  // Blobs kept from Forward to Backward (pooling's argmax, dropout's mask), named "<layer>.<what>"; the net
  // lists them in its plan beside the tops.
  const std::vector<std::shared_ptr<Blob>>& internal_blobs() const { return internal_blobs_; }
  const std::vector<std::string>& internal_blob_names() const { return internal_blob_names_; }
  // How long an internal blob's values must live. kAcrossPasses (the default, always safe): from one pass into the
  // next (a recurrent layer's carried state). kUntilBackward: every Forward writes all of it before anything reads
  // it, and only this layer's Backward of the same pass reads it (pooling's argmax, dropout's mask); the memory plan
  // then gives it memory from Forward to Backward only, and only for its step in a pass without backward.
  enum class InternalLifetime { kAcrossPasses, kUntilBackward };
  InternalLifetime internal_blob_lifetime(int index) const { return internal_lifetimes_[index]; }
  // For a layer made of other layers (SPP runs a Pooling per level): before the inner layer's SetUp, the blobs its
  // LayerSetUp will add (AddInternalBlob), in order, are given as the outer layer's own internal blobs, which the
  // net sees and plans. SetUp checks that the inner layer took them all.
  void LendInternalBlobs(std::vector<std::shared_ptr<Blob>> blobs);

  // Memory the layer holds for as long as it lives, outside the net's plan because it is no pass's scratch and no
  // value of one: a data layer's batches read ahead, an engine's weights reordered into its own layout, a loss's
  // matrix read from a file. The net lists it beside the plan (Net::HeldBuffers, `crema time`); none by default.
  // Scratch of one call is a workspace request instead, and values kept from forward to backward internal blobs.
  struct HeldBuffer {
    std::string what;  // "batches read ahead (3 of 3)"
    size_t bytes = 0;
    Device device = Device::kCPU;
  };
  virtual std::vector<HeldBuffer> HeldBuffers() const { return {}; }

  // Inference rewrites (net/fold.hpp), for a net that runs forward only. What a layer says of itself with its
  // current parameters; the net decides where a rewrite is safe (the blobs it would leave unwritten are read by no
  // one else) and builds the rewritten layers.
  // The activation this layer is, where it is one that a producer may fuse (ReLU, ELU, Sigmoid, TanH, Clip); kind
  // kNone otherwise.
  virtual FusedActivation AsFusedActivation() const { return {}; }
  // Whether Forward copies its bottom to its top unchanged (Dropout in TEST, Split): the step may vanish, its readers
  // reading the bottom.
  virtual bool ForwardIsIdentity() const { return false; }
  // Where Forward maps each channel (axis 1) c of its one bottom to scale[c] * x + shift[c] (BatchNorm with stored
  // statistics, Scale and Bias with learned per-channel parameters): fills them, with `channels` entries, and says
  // true. False otherwise.
  virtual bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const { return false; }
  // Whether this layer's output channels (axis 1 of its one top) can absorb a channel affine map into its own
  // parameters (Convolution, Deconvolution, InnerProduct over axis 1; the rewrite gives one without a bias a bias),
  // and the absorbing, by a layer with a bias: weights of output channel c times scale[c], bias[c] * scale[c] +
  // shift[c].
  virtual bool AbsorbsChannelAffine() const { return false; }
  virtual void AbsorbChannelAffine(const std::vector<float>& scale, const std::vector<float>& shift);
  // Whether this layer can apply `activation` to its output (the producers above), and, before SetUp, asking it to.
  // An engine that computes it in its own pass answers ComputesFusedActivation(); for the others Forward applies it
  // to the tops after the engine's work.
  virtual bool TakesFusedActivation(const FusedActivation& activation) const { return false; }
  void set_fused_activation(const FusedActivation& activation) {
    fused_activation_ = activation;
    activation_with_backward_ = false;
  }
  const FusedActivation& fused_activation() const { return fused_activation_; }
  // Training's fusion (net/fuse.hpp): a ReLU of slope 0 or more, which Backward then runs too (the top's gradient
  // where the output is positive, slope times it elsewhere, in place) before the layer's own backward, whose output
  // gradient it is. The layer's step then reads its top in backward (BackwardReadsTop). Any other activation is
  // refused. The pass fuses it where the engine applies it in a pass over the output that it makes anyway
  // (AppliesActivationInItsOwnPass): oneDNN's post-op, cuDNN's bias and ReLU, the half-precision engines' 16-bit top.
  void set_fused_activation_with_backward(const FusedActivation& activation);
  virtual bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const { return false; }
  bool activation_with_backward() const { return activation_with_backward_; }
  // Whether Forward is the plain sum of its two bottoms (Eltwise SUM with coefficients 1), which a producer of one
  // of them may take over (ResNet's shortcut sums).
  virtual bool ForwardIsSumOfTwo() const { return false; }
  // Whether this layer can add a blob of its top's shape to its output (before the fused activation), and, before
  // SetUp, asking it to: the step then gives the layer that blob as its last bottom (the summand), which SetUp,
  // Reshape and the engine's forward do not see among the bottoms; the engine adds it in its own pass where it
  // says so (ComputesFusedSum), else Forward adds it after the engine's work.
  virtual bool TakesFusedSum() const { return false; }
  void set_fused_sum(bool on) { fused_sum_ = on; }
  bool fused_sum() const { return fused_sum_; }
  // With a fused sum: the quantization the sum's own layer was given (an Eltwise's QuantizationParameter, `crema
  // quantize`'s measure of the range of its inputs), which an 8-bit engine offers for a summand no 8-bit step reads
  // (Layer::ReadsAnyQuantization); floats where it has none. The fold sets it.
  void set_sum_quantization(const Quantization& q) { sum_quantization_ = q; }
  const Quantization& sum_quantization() const { return sum_quantization_; }
  // With a fused sum whose summand lies in floats while the output is planned in 8 bits (plan_element_types): the
  // quantization the summand's 8-bit readers apply to it (or the sum's own), which the engine puts it into the output's
  // memory in (floats where there is none).
  void set_float_summand_quantization(const Quantization& q) { float_summand_quantization_ = q; }
  const Quantization& float_summand_quantization() const { return float_summand_quantization_; }
  // With a fused sum: whether the engine adds into an output that already holds the summand's values, so that the
  // memory plan may give the top the summand's memory where no later step reads the summand (forward only), which
  // saves copying it there first. Engines that write their output before adding (Forward's generic sum) do not.
  virtual bool SumsIntoSummandMemory() const { return false; }
  // The bottoms the layer's own code sees: without the summand of a fused sum.
  std::vector<Blob*> OwnBottoms(const std::vector<Blob*>& bottom) const;

  // Scratch memory: the floats this layer asked for in its last Reshape, and the buffer it uses. The net gives
  // every layer one shared workspace sized to the largest request; a layer on its own uses a buffer of its own.
  size_t workspace_floats() const { return workspace_floats_; }
  // The blob the workspace lies in (the net's shared one, or the layer's slot of the arena; null before the net
  // gave one): what analyses of the plan's memory read (net/step_graph.hpp).
  const Blob* workspace_blob() const { return workspace_.get(); }
  void set_workspace(std::shared_ptr<Blob> workspace) {
    workspace_ = std::move(workspace);
    workspace_is_shared_ = true;
  }

  // Whether Backward may follow Forward. A net whose memory is planned for forward alone says no (it refuses
  // Backward), and a layer may then leave out what it saves only for backward (oneDNN's LRN keeps no workspace);
  // the net reshapes the layer after changing it.
  void set_backward_planned(bool planned) { backward_planned_ = planned; }
  bool backward_planned() const { return backward_planned_; }

  float loss(int top_index) const { return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0.f; }
  void set_loss(int top_index, float weight);

  bool param_propagate_down(int index) const {
    return index < static_cast<int>(param_propagate_down_.size()) && param_propagate_down_[index];
  }
  void set_param_propagate_down(int index, bool value);
  // Parameter gradients are added to (Caffe's accumulation: iter_size passes, shared parameters), so the net zeroes
  // them before each iteration's backward (Net::ClearParamDiffsInBackward). An engine whose backward can write a
  // gradient instead of adding to it says so here; the net then leaves that gradient's zeroing to it
  // (ZeroParamGradientInBackward, where the layer alone writes the parameter and its backward runs): its next backward
  // writes the gradient (a pass over it saved, and the read that adding takes). Only in a backward where
  // param_propagate_down(index).
  virtual bool WritesZeroedParamGradients() const { return false; }
  void ZeroParamGradientInBackward(int index);
  // Takes the mark of ZeroParamGradientInBackward (the net zeroes the gradient itself after all).
  void TakeParamGradientZeroing(int index) { ParamGradientKeep(index); }
  bool param_gradient_zero_pending(int index) const {
    return index < static_cast<int>(zero_pending_.size()) && zero_pending_[index];
  }

  // Runtime state for an exact resume (data cursors, random streams). The default saves the layer's
  // random stream if it has used one.
  virtual void SaveRuntimeState(LayerRuntimeState* state) const;
  virtual void RestoreRuntimeState(const LayerRuntimeState& state);
  // True for layers that read a data set (their cursor must be saved with the solver state).
  virtual bool HasRuntimeState() const { return random_ != nullptr; }

 protected:
  virtual void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) = 0;
  // Default GPU slots fail clearly; a layer with CUDA code overrides them.
  virtual void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  virtual void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom);

  // The weight top `top_index` counts with in the net's loss when the prototxt gives no loss_weight (LossLayer's
  // first top: 1).
  virtual float DefaultLossWeight(int top_index) const { return 0.f; }

  // For a layer whose backward pass reads its input and that may run in place (Clip, Log, Power, PReLU), where the
  // forward pass overwrites that input: KeepInputWhenInPlace in LayerSetUp declares the internal blob
  // `<layer>.input` when top and bottom are one blob; ReshapeKeptInput in Reshape; KeepInput before the forward
  // pass writes; Input(bottom) is then what backward reads (the bottom itself when not in place).
  void KeepInputWhenInPlace(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void ReshapeKeptInput(const Blob& bottom);
  void KeepInput(const Blob& bottom);
  const Blob& Input(const Blob& bottom) const {
    return borrowed_input_ != nullptr ? *borrowed_input_ : kept_input_ != nullptr ? *kept_input_ : bottom;
  }

  // This layer's own random stream, seeded from the context's seed and the layer's name on first use.
  RandomStream* random();
  // For layers made of other layers (SoftmaxWithLoss runs a Softmax): they share this layer's context.
  const std::shared_ptr<Context>& shared_context() const { return context_; }

  // In LayerSetUp: a blob kept from Forward to Backward, described by `what` ("argmax").
  Blob* AddInternalBlob(const std::string& what, InternalLifetime lifetime = InternalLifetime::kAcrossPasses);
  // In Reshape: this call's scratch needs `floats` values (the largest request of one Reshape counts).
  void RequestWorkspace(size_t floats);
  // In Forward or Backward: at least the requested floats, on the layer's device; contents undefined.
  float* workspace();
  // Whether Forward and Backward run the layer's GPU code (on a GPU, or rehearsed on the host): what a layer asks
  // workspace for in Reshape may depend on it.
  bool RunsGpuCode() const;
  // The precision asked of the layer's products (requested_precision) where it runs GPU code on a device that
  // multiplies in it (core/half_products.hpp: a GPU's tensor cores, or the host rehearsal), else float32: what the GPU
  // engines' products compute in.
  Precision GpuCodePrecision() const;
  // For an engine whose products compute in `half` (float16 or bfloat16; float32: none of this) in GPU code: the
  // 16-bit operands it reads bottom `bottom` as (its ReadsQuantized: a bottom the plan keeps in that type is read as it
  // lies, one in floats is rounded first; a fused sum's summand, the last bottom, is added in floats), whether it can
  // write a top of element type `type` (its WritesQuantized: that type, where no fused sum and no fused activation but
  // a ReLU is to follow the products; a ReLU fused for training then reads the output's signs from the 16-bit values),
  // and what HalfTop then adds to the products' results: the bias (`bias` per channel of `spatial` values, where
  // given) and the ReLU.
  Quantization HalfOperands(Precision half, int bottom) const;
  // For a layer whose GPU code reads an input in its products' 16-bit type where `reads_half` (BatchNorm with its
  // Scale fused, an AVE pooling, a residual sum with its ReLU; a float input is then rounded to that type first): its
  // ReadsQuantized, that type, else floats. And whether bottom `bottom`, `blob`, lies in 16 bits, which must then be
  // that type where the layer reads it so (else an error naming the layer, the bottom and the type).
  Quantization HalfInput(bool reads_half) const;
  bool BottomIsHalf(const Blob& blob, int bottom, bool reads_half) const;
  bool WritesHalfTop(Precision half, ElementType type) const;
  // Whether such an engine applies `activation` in the pass that writes its 16-bit top (a ReLU, in GPU code computing
  // in half precision): its AppliesActivationInItsOwnPass.
  bool HalfTopApplies(const FusedActivation& activation) const;
  HalfTopFinish HalfTopFinishOf(const float* bias, int spatial, int channels) const;
  // Of the tops of such an engine: whether any lies in 16 bits (the engine then applies the fused activation to all
  // of them itself, FinishFloatTops, and says so in ComputesFusedActivation).
  static bool AnyHalfTop(const std::vector<Blob*>& top);
  void FinishFloatTops(const std::vector<Blob*>& top);

  // Parameters that came with the LayerParameter (from a .caffemodel) must have the shapes this prototxt
  // implies; names[i] says what blob i is in errors ("weights", "bias"). Legacy files store every blob as 4-d
  // (num, channels, height, width), so the expected shape padded with leading ones is accepted too, and the
  // blob then takes the expected shape.
  void AdoptStoredParameters(const std::vector<std::vector<int>>& expected, const std::vector<const char*>& names);

  // The index in [0, num_axes) of `axis`, the value of this layer's parameter `field` (e.g.
  // "softmax_param.axis"), for `blob`; negative axes count from the end. Throws naming the layer, the field
  // and the blob's shape when the axis is out of range.
  int CanonicalAxis(const Blob& blob, int axis, const std::string& field) const;

  // `blob` seen as outer x classes x inner around its axis `axis` (this layer's parameter `field`): the view
  // of softmax, losses and accuracy.
  struct ClassAxis {
    int axis, outer, classes, inner;
  };
  ClassAxis SplitAtClassAxis(const Blob& blob, int axis, const std::string& field) const;
  // Labels must hold one value per position of the scores (outer * inner); throws naming both shapes.
  void CheckLabelCount(const Blob& labels, const Blob& scores, const ClassAxis& split) const;
  // Checks every label of `labels` (read on the host, where data layers write them) as Caffe reads it
  // (LabelClass: truncated toward zero) but those that read as *ignore_label (when given): each must read as a
  // class in [0, classes), else this throws naming the layer, the value and its index (NaN fails too). The first
  // fractional label a layer meets is named in a warning, once. Returns how many labels were not ignored, and counts
  // them by class in *per_class when given (sized `classes`).
  int CheckLabels(const Blob& labels, int classes, const int* ignore_label, std::vector<int>* per_class = nullptr);
  // For a label or index `value` that truncates into range (`named` says which: "index 2.5 at position 3 of the
  // bottom"): when it is not a whole number, warns that it reads as LabelClass(value), as in Caffe, once per layer.
  void NoteFractional(float value, const std::string& named);

  // "layer 'conv1' (Convolution)": the prefix of every error message about this layer.
  std::string describe() const;

  // What a backward adds parameter `index`'s gradient to: 0 (writes it) where the net left its zeroing to this
  // backward, the mark then taken (ZeroParamGradientInBackward), else 1 (adds).
  float ParamGradientKeep(int index);

  LayerParameter param_;
  std::vector<std::shared_ptr<Blob>> params_;
  std::vector<bool> param_propagate_down_;
  std::vector<bool> zero_pending_;  // ZeroParamGradientInBackward's marks, by parameter
  std::vector<float> loss_;
  FusedActivation fused_activation_;
  bool activation_with_backward_ = false;  // set_fused_activation_with_backward's
  bool fused_sum_ = false;
  Quantization sum_quantization_, float_summand_quantization_;
  const Blob* summand_ = nullptr;  // during Forward and ReshapeAll, with a fused sum: the blob to add
  // An engine that computes the fused activation itself (in its primitive) says so; Forward leaves it alone then.
  virtual bool ComputesFusedActivation() const { return false; }
  // The same for the fused sum (the engine reads summand_); one that computes the activation must compute the sum.
  virtual bool ComputesFusedSum() const { return false; }

 private:
  void CheckArity(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;
  std::shared_ptr<Context> context_;
  std::string engine_;
  std::unique_ptr<RandomStream> random_;
  // PrepareReplay's record: the stream as it was (null: none was made yet), and the parameters Forward updates.
  std::unique_ptr<RandomStream> replay_random_;
  std::vector<std::shared_ptr<Blob>> replay_params_;
  std::vector<std::shared_ptr<Blob>> internal_blobs_;
  std::vector<std::string> internal_blob_names_;
  std::vector<InternalLifetime> internal_lifetimes_;
  std::vector<std::shared_ptr<Blob>> lent_internal_;  // LendInternalBlobs' blobs, and how many AddInternalBlob took
  size_t lent_taken_ = 0;
  size_t workspace_floats_ = 0;
  std::shared_ptr<Blob> workspace_;
  bool workspace_is_shared_ = false;
  bool backward_planned_ = true;
  bool warned_fractional_ = false;
  Blob* kept_input_ = nullptr;            // KeepInputWhenInPlace's copy, in place only
  const Blob* borrowed_input_ = nullptr;  // BorrowKeptInput's source, read instead of the copy
  std::string borrowed_name_;
};

// A layer that reads a data set into its tops on the host (Data, ImageData, WindowData, HDF5Data, MemoryData):
// no bottoms, no gradient, and a cursor and random stream saved with the solver state. On a GPU context it
// builds its batch the same way; the next layer's gpu_data() copies it over.
class HostDataLayer : public Layer {
 public:
  using Layer::Layer;
  int ExactNumBottomBlobs() const override { return 0; }
  bool HasRuntimeState() const override { return true; }

 protected:
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) final {}
  // Builds the batch on the host; a layer that uploads it itself (Data's prefetch thread) overrides this.
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Forward_cpu(bottom, top);
  }
  void Backward_gpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) final {}
};

// A loss (Caffe's LossLayer contract, declared once): predictions and targets in, a scalar loss out that counts in
// the net's loss with weight 1 unless the prototxt gives loss_weight; the top is made when the prototxt names none,
// and force_backward gives the targets (bottom 1) no gradient. Losses of other arity override the counts.
class LossLayer : public Layer {
 public:
  using Layer::Layer;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }
  // The loss's backward reads the gradient of its loss top (the loss weight), never the loss itself.
  bool BackwardReadsTop(int top) const override { return top != 0; }

 protected:
  float DefaultLossWeight(int top_index) const override { return top_index == 0 ? 1.f : 0.f; }
};

// A layer written once for both devices: Forward_any and Backward_any read pointers with data_on(device())
// and compute with the context's math (gemm(context(), ...), for_each_element(context(), ...)), and the four
// device slots run them. Base is Layer or a shared base such as BaseConvolutionLayer.
template <typename Base>
class BothDevices : public Base {
 public:
  using Base::Base;

 protected:
  virtual void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) = 0;

  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final { Forward_any(bottom, top); }
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final { Forward_any(bottom, top); }
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) final {
    Backward_any(top, propagate_down, bottom);
  }
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) final {
    Backward_any(top, propagate_down, bottom);
  }
};

// A layer whose code runs on the host on either device (the Python layer's user code, the Expression layer's
// programs for now): its GPU slots run its CPU ones, and SyncedMemory moves the values to the host and back.
template <typename Base>
class HostOnGpu : public Base {
 public:
  using Base::Base;

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final {
    this->Forward_cpu(bottom, top);
  }
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) final {
    this->Backward_cpu(top, propagate_down, bottom);
  }
};

// A GPU-only engine (cuDNN's): its CPU slots fail clearly. The registry never picks it for a CPU context.
template <typename Base>
class GpuOnly : public Base {
 public:
  using Base::Base;

 protected:
  void Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>&) final { FailOnTheCpu(); }
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) final {
    FailOnTheCpu();
  }

 private:
  void FailOnTheCpu() const {
    CREMA_FAIL() << this->describe() << ": engine '" << this->engine()
                 << "' runs on the GPU only (the registry picks another engine on the CPU)";
  }
};

// A layer of per-element rules: one bottom, one top of the bottom's shape, in place allowed (ReLU, Dropout,
// Sigmoid, TanH, Power, ...). Its ForwardElements and BackwardElements are written once for both devices:
// they read pointers with data_on(device()) and run their rules with for_each_element(context(), ...); the
// layer's .cu file compiles the rules' GPU kernels (CREMA_GPU_ELEMENTWISE).
class NeuronLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  virtual void ForwardElements(const Blob& bottom, Blob* top) = 0;
  // Called only when the bottom's gradient is wanted.
  virtual void BackwardElements(const Blob& top, Blob* bottom) = 0;

  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final {
    ForwardElements(*bottom[0], top[0]);
  }
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) final {
    if (propagate_down[0]) BackwardElements(*top[0], bottom[0]);
  }
};

}  // namespace crema
