// What crema's oneDNN engines share (builds with oneDNN only; this header includes dnnl.hpp, so only the
// engines' .cpp files include it): the process's CPU engine, the padding arithmetic that reproduces Caffe's
// output sizes, and the binding of crema's plain NCHW buffers and the net's workspace to oneDNN memories.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/bf16_blocked_copy.hpp"
#include "core/blob.hpp"
#include "layers/layer.hpp"

namespace crema {
namespace onednn {

// One engine for the process: oneDNN's CPU engine is stateless apart from its kernel caches.
const dnnl::engine& CpuEngine();
// The calling thread's stream on that engine (made once per thread: a layer call no longer makes one).
dnnl::stream& CpuStream();
// The reorder primitive from layout `from` to layout `to`, made once per pair for the process and kept (thread-safe):
// making one costs some microseconds (its implementation is looked up and its kernel made or found in oneDNN's cache),
// as much as a small reorder's work, and a layer reorders the same pair on every pass.
const dnnl::reorder& Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);

// oneDNN computes out = (in + pad_left + pad_right - extent) / stride + 1 exactly, where Caffe rounds (down
// for convolution, up for pooling) with the same pad on both sides: the right pad that gives Caffe's size
// `out`, or -1 when none does.
int RightPadding(int in, int out, int pad, int extent, int stride);

inline dnnl::memory::dims Dims(std::initializer_list<int> values) {
  return dnnl::memory::dims(values.begin(), values.end());
}

// The descriptor of a 4-d f32 blob of `shape` (N, C, H, W) in layout `tag` (crema's own: NCHW).
dnnl::memory::desc PlainDesc(const std::vector<int>& shape,
                             dnnl::memory::format_tag tag = dnnl::memory::format_tag::nchw);

// oneDNN's name for one of crema's layouts (core/layout.hpp) of a 4-d blob.
dnnl::memory::format_tag TagOf(Layout layout);
// The descriptor of a 4-d blob of `shape` in crema's `layout` (of elements of `type`), and of a blob's data as it is
// now (its layout and element type).
dnnl::memory::desc LayoutDesc(const std::vector<int>& shape, Layout layout,
                              dnnl::memory::data_type type = dnnl::memory::data_type::f32);
dnnl::memory::desc BlobDesc(const Blob& blob);
// oneDNN's name for one of crema's element types (core/element_type.hpp).
dnnl::memory::data_type DataTypeOf(ElementType type);
// The layout of crema's that `desc` (a primitive's choice for a blob of `shape`) is, or kPlain when it is none
// of them (or pads the channels).
Layout LayoutOf(const dnnl::memory::desc& desc, const std::vector<int>& shape);

// Primitive attributes with the scratchpad in the caller's hands (the net's workspace), as every engine has it.
dnnl::primitive_attr UserScratchpad();
// UserScratchpad with `activation` (a fused ReLU, ELU, Sigmoid, TanH or Clip; none: nothing) as an eltwise post-op:
// the primitive applies it to its output as it writes it.
// With `sum`, a sum post-op first: the primitive adds what its output buffer holds (a fused Eltwise SUM's summand),
// times `sum_scale` (an 8-bit output holding an 8-bit summand of another scale: the ratio of the two), read as
// `sum_type` (undef: the output's; an 8-bit summand of the other 8-bit type than the output's).
dnnl::primitive_attr UserScratchpadWith(const FusedActivation& activation, bool sum = false, float sum_scale = 1.f,
                                        dnnl::memory::data_type sum_type = dnnl::memory::data_type::undef);
// `desc`, its layout and dimensions, holding `type`.
dnnl::memory::desc WithDataType(const dnnl::memory::desc& desc, dnnl::memory::data_type type);

// Whether oneDNN implements `pd` with its reference kernel (plain loops: 10-100x slower than its jit ones),
// which engines avoid by trying another layout (LRN, pooling's gradient).
bool IsReference(const dnnl::primitive_desc_base& pd);

// Runs `primitive` (a concat or a sum) over several bottoms, each in its layout `sources[b]`, into the top `dst`
// (layout `dst_desc`), with its scratchpad (layout `scratch_desc`) in `workspace` at region `scratch`; its memories
// kept in `bindings` from call to call.
class Bindings;
void RunOnSources(const dnnl::primitive& primitive, const dnnl::memory::desc& scratch_desc,
                  const std::vector<dnnl::memory::desc>& sources, const std::vector<Blob*>& bottom,
                  const dnnl::memory::desc& dst_desc, void* dst, float* workspace, size_t scratch, Bindings* bindings);

// Workspace regions for one layer's buffers, in bytes from a 64-byte aligned start. Phases that run one
// after another (forward, each gradient) reuse the same bytes: Restart() begins a new phase.
// Adds `from`, a 4-d or 5-d tensor (a (de)convolution's weights) in oneDNN's blocked layout `blocked`, to `to`, the
// same tensor in crema's layout `plain` (oihw, or a deconvolution's iohw; groups first), on every thread: a weight
// gradient into the parameter's diff in one pass (a reorder to the workspace and an addition took two, oneDNN's reorder
// of 16 x 16 weight blocks moving 2-4 GB/s on an Intel Xeon). False, doing nothing, for layouts that are not blocked or
// another number of dimensions.
bool AddToPlain(const dnnl::memory::desc& blocked, const float* from, const dnnl::memory::desc& plain, float* to);

class Regions {
 public:
  size_t Add(const dnnl::memory::desc& desc);
  // A region for a copy of a buffer of layout `user` reordered to `wanted` (Binder::In, Result): none where the
  // two are the same (the Binder then uses the buffer itself; the offset returned is never read).
  size_t AddCopy(const dnnl::memory::desc& wanted, const dnnl::memory::desc& user);
  // The next phase's regions start at `kept` (0, or a Mark): the regions before it stay valid through that phase, so
  // that a buffer converted once serves two phases (a convolution's output gradient, read alike by both backward
  // passes).
  void Restart(size_t kept = 0);
  size_t Mark() const { return bytes_; }
  // The bytes of the largest phase so far, plus the alignment slack: what to RequestWorkspace (in floats).
  size_t Floats() const;

 private:
  size_t bytes_ = 0, largest_ = 0;
};

// The arguments of one primitive call, without a heap allocation (dnnl::primitive::execute copies a map into a
// vector on every call): at most kMost of them, each set once per call.
class Args {
 public:
  static constexpr int kMost = 12;
  Args() = default;
  Args(std::initializer_list<std::pair<int, dnnl::memory>> args);
  // The memory bound to argument `arg` (DNNL_ARG_SRC...), added empty where it is not bound yet.
  dnnl::memory& operator[](int arg);
  // Runs `primitive` over these arguments on `stream` (without waiting for it).
  void Run(const dnnl::primitive& primitive, dnnl::stream& stream) const;

 private:
  std::pair<int, dnnl::memory> args_[kMost];
  int size_ = 0;
};

// Runs `reorder` from `from` into `to`.
void RunReorder(const dnnl::reorder& reorder, dnnl::stream& stream, const dnnl::memory& from, const dnnl::memory& to);

// The oneDNN memories of one kind of call of a layer (its forward, or one of its gradients), kept from one call to
// the next. Making a memory costs about a microsecond (oneDNN allocates its objects and looks up its layout), and a
// reorder's lookup as much: at batch 1 that is a small layer's whole work, on every pass. A call asks for its
// memories in the same order every time, so its k-th request is matched with the k-th memory kept: the same
// descriptor reuses it, pointed at the new buffer where the buffer moved (a new memory plan, another bottom);
// another descriptor replaces it. A Binder made over the Bindings asks through them.
class Bindings {
 public:
  // The next memory of the call: `desc` over `data`.
  dnnl::memory Next(const dnnl::memory::desc& desc, void* data);
  // The reorder from the descriptor of the memory asked for before the last to that of the last (made once per entry).
  const dnnl::reorder& ReorderOfLastTwo();
  void Restart() { next_ = 0; }

 private:
  struct Entry {
    dnnl::memory::desc desc;
    dnnl::memory memory;
    void* data = nullptr;
    const dnnl::reorder* reorder = nullptr;  // into this entry, from the one before it
  };
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

// Binds crema's buffers and the workspace to oneDNN memories, reordering between layouts where they differ. With
// `bindings`, the memories are those kept from the call before (Bindings); without, made afresh.
class Binder {
 public:
  explicit Binder(float* workspace, Bindings* bindings = nullptr);
  // `data` in layout `user`, as the primitive wants it (`wanted`): itself, or a reordered copy in the workspace.
  dnnl::memory In(const dnnl::memory::desc& user, const void* data, const dnnl::memory::desc& wanted, size_t region);
  // Where the primitive writes a result destined for `data` (layout `user`): `data` itself, or a workspace
  // buffer that Out() reorders into it afterwards.
  dnnl::memory Result(const dnnl::memory::desc& user, void* data, const dnnl::memory::desc& wanted, size_t region);
  void Out(const dnnl::memory& result, const dnnl::memory::desc& user, void* data);
  // A buffer of layout `desc` in the workspace (scratchpads, intermediate results).
  dnnl::memory Scratch(const dnnl::memory::desc& desc, size_t region);
  // A memory over crema's own buffer, in its layout.
  dnnl::memory Plain(const dnnl::memory::desc& user, const void* data);
  float* At(size_t region) { return reinterpret_cast<float*>(base_ + region); }
  dnnl::stream& stream() { return CpuStream(); }

 private:
  dnnl::memory Make(const dnnl::memory::desc& desc, const void* data);
  // Reorders `from` into `to`, the two memories made last.
  void ReorderLastTwo(const dnnl::memory& from, const dnnl::memory& to);

  char* base_ = nullptr;
  Bindings* bindings_ = nullptr;
};

// Weights reordered into a primitive's layout, kept from one pass to the next while the blob's data is
// unchanged (Blob::data_version): a net that runs forward over and over without an update between (a test
// pass, inference) reorders each layer's weights once. The copy is the layer's own memory, not the workspace,
// which other layers overwrite. Training updates the weights every iteration, so there it reorders each time,
// as it would without the cache; except a bf16 copy in a blocked layout of pairs (the fully connected layers' in
// bf16, PairBlockedLayoutOf), which crema writes itself (core/bf16_blocked_copy.hpp) and registers with the blob
// (DeriveFrom): the solver's update writes it as it writes the weights (core/derived_copy.hpp).
class WeightCache {
 public:
  // Sets the layout the primitive wants and crema's (`user`); a new layout empties the cache.
  void Describe(const dnnl::memory::desc& wanted, const dnnl::memory::desc& user);
  // Where crema writes the wanted layout itself (a bf16 one of pairs from plain float rows: an inner product's weights,
  // or a 1x1 convolution's): makes that copy and registers it with `blob`, whose data the cache is for, so that the
  // solver's update writes it. Whether it did.
  bool DeriveFrom(Blob* blob);
  // Whether the copy is one crema writes, registered with the blob (DeriveFrom), and that copy (as of the last Get).
  bool derived() const { return derived_ != nullptr; }
  const Bfloat16BlockedCopy& derived_copy() const { return *derived_; }
  // Whether the primitive reads the weights in crema's own layout (then nothing is cached).
  bool plain() const { return wanted_ == user_; }
  const dnnl::memory::desc& wanted() const { return wanted_; }
  // The weights of `blob` in the wanted layout: the blob's own data, the copy kept, or a new copy.
  dnnl::memory Get(const Blob& blob, dnnl::stream& stream);
  // The bytes of the copy (0 while none is made).
  size_t bytes() const;

 private:
  std::shared_ptr<Bfloat16BlockedCopy> derived_;  // the copy crema writes, where DeriveFrom made one
  dnnl::memory derived_memory_;
  dnnl::memory::desc wanted_, user_;
  std::shared_ptr<SyncedMemory> copy_;
  dnnl::memory source_memory_, copy_memory_;  // kept from call to call (Bindings says why)
  const dnnl::reorder* reorder_ = nullptr;
  uint64_t version_ = 0;           // the blob's data_version when the copy was made (0: none made)
  const float* source_ = nullptr;  // and its data
};

// The layout of `wanted` as a pair-blocked bf16 copy of `user`'s rows (core/bf16_blocked_copy.hpp), where it is one:
// `user` plain float32 outputs x inputs, `wanted` bf16 in blocks of outputs by pairs of inputs (inner blocks P of
// the inputs, B of the outputs, 2 of the inputs), or in blocks of inputs by pairs of outputs (the transpose's: a
// transposed layout, a convolution's weights for its input gradient). False where not.
bool PairBlockedLayoutOf(const dnnl::memory::desc& wanted, const dnnl::memory::desc& user, PairBlockedLayout* layout);
// Whether crema writes such copies (WeightCache::DeriveFrom): unless CREMA_DERIVED_WEIGHTS=0 (for comparisons: the
// copies are then oneDNN's reorders in the pass, and the layers that pay only with them compute in float32).
bool WritesDerivedWeights();

// 8-bit weights for a primitive that computes in integers (QuantizationParameter: Convolution, InnerProduct). Each
// output's weights are mapped to round(w * s) clamped to [-127, 127], s = 127 / their largest magnitude (1 where all
// are 0); the primitive's output scale for that output is 1 / (input_scale * s), and the bias it adds to the integer
// sums is bias * input_scale * s. Kept, in the primitive's layout, while the weights and the bias are unchanged.
class Int8Weights {
 public:
  // Whether `weights` or `bias` changed (another version or buffer) since the last Quantize.
  bool Stale(const Blob& weights, const Blob* bias) const;
  // Quantizes `weights`, `outputs` of them, output o's value i at o * output_stride + i * input_stride (count /
  // outputs values each), with `bias` (or none) for inputs scaled by `input_scale`. `who` names the layer in errors.
  void Quantize(const Blob& weights, const Blob* bias, int outputs, int64_t output_stride, int64_t input_stride,
                float input_scale, const std::string& who);
  // The quantized weights, outputs first (`plain`: an s8 descriptor of them), reordered into `wanted` in memory of
  // their own.
  const dnnl::memory& Place(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted);
  const dnnl::memory& placed() const { return placed_; }
  // The primitive's output scales, each times `top_scale` (the scale of a top kept in 8 bits, plan_element_types; 1
  // for a float top).
  std::vector<float> OutputScales(float top_scale) const;
  const std::vector<float>& scaled_bias() const { return scaled_bias_; }
  size_t bytes() const { return copy_ ? copy_->size() : 0; }

 private:
  std::vector<int8_t> values_;
  std::vector<float> output_scales_, scaled_bias_;
  std::shared_ptr<SyncedMemory> copy_;
  dnnl::memory placed_;
  uint64_t weights_version_ = 0, bias_version_ = 0;
  const float* weights_data_ = nullptr;
  const float* bias_data_ = nullptr;
};

// The reorder from float `from` into 8-bit `to` (u8 or s8) as round(x * scale), saturated.
dnnl::reorder QuantizingReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, float scale);
// Says, once per process, that layer `who` computes in float although set to 8 bits, and why (`why`: oneDNN's
// refusal); later such layers are not named.
void WarnInt8Refused(const std::string& who, const std::string& why);
// What a layer computing in 8 bits (`runs_int8`) over one bottom reads and writes (Layer::ReadsQuantized,
// WritesQuantized): its bottom quantized as its QuantizationParameter says; its top in 8 bits where the fused
// activation, if any, is a ReLU (whose result scales with its input: scaling after it is scaling before), a fused sum
// or none before it (the summand, in whatever type it lies, scaled into the output's).
// With several bottoms, one set of primitives serves them all, made for the first pair's element types: floats.
Quantization Int8Reads(const Layer& layer, bool runs_int8, int bottom);
bool Int8Writes(const Layer& layer, bool runs_int8, int top);
// An Error naming `who` where `remade`, its 8-bit forward made again for new weights (the output scales follow them),
// does not keep the layouts of `made`, the one the layer was reshaped for, or needs a larger scratchpad.
void CheckRemadeKeepsLayouts(const dnnl::primitive_desc_base& made, const dnnl::primitive_desc_base& remade,
                             const std::string& who);

// Whether oneDNN computes 8-bit products on this CPU with VNNI's dot products (AVX512_VNNI, AVX_VNNI or AMX; as
// DNNL_MAX_CPU_ISA limits them). Without them its kernels add pairs of 8-bit products into 16-bit sums that saturate
// (255 * 127 twice is past 32767), so a layer set to 8 bits computes in float there (Int8Allowed).
bool HasInt8DotProducts();
// Whether `layer`, set to 8 bits, may compute in them here (HasInt8DotProducts); else false and the reason said once
// per process (WarnInt8Refused).
bool Int8Allowed(const Layer& layer);
// Whether the instructions oneDNN runs (as DNNL_MAX_CPU_ISA limits them) include `wanted`'s. The ISAs are bit masks,
// each a superset of those it extends, but not ordered: AVX2_VNNI's value is above AVX512_CORE's.
bool EffectiveIsaHas(dnnl::cpu_isa wanted);
// Whether oneDNN computes bf16 products on this CPU with bf16 instructions (AVX512_BF16 or AMX; as DNNL_MAX_CPU_ISA
// limits them): elsewhere it emulates them, slower than float32.
bool HasBfloat16Kernels();
// The precision `layer`'s oneDNN products compute in: the one it asks for (Layer::requested_precision) where this CPU
// has the kernels (bf16 with HasBfloat16Kernels; float16 never on a CPU), else float32, the reason said once per
// process and precision.
Precision EnginePrecision(const Layer& layer);
// Says, once per process, that layer `who` computes in float32 though set to `precision`, oneDNN having refused the
// primitive (`why`).
void WarnHalfRefused(const std::string& who, Precision precision, const std::string& why);

// A forward and a backward primitive between one NCHW bottom and one NCHW top, in whatever layouts the
// primitives chose (Pooling, LRN): the workspace regions of their reordered buffers and scratchpads, oneDNN's
// own workspace kept from forward to backward (`saved`: an internal blob of the layer), and the two passes.
class Passes {
 public:
  // `user_src` and `user_dst` are crema's layouts of the bottom and the top; `backward_reads_src`: the backward
  // primitive takes the forward's input too (LRN), not only the top's gradient (pooling). The gradients lie in
  // `src_diff_type` and `dst_diff_type` (float32, or bf16 where the plan keeps them so) in the data's layouts.
  Passes(const dnnl::memory::desc& user_src, const dnnl::memory::desc& user_dst,
         const dnnl::primitive_desc_base& forward, const dnnl::primitive_desc_base& backward, bool backward_reads_src,
         dnnl::memory::data_type src_diff_type = dnnl::memory::data_type::f32,
         dnnl::memory::data_type dst_diff_type = dnnl::memory::data_type::f32);
  // What the layer requests: workspace floats, and the floats of oneDNN's workspace for its `saved` blob.
  size_t workspace_floats() const { return regions_.Floats(); }
  size_t saved_floats() const { return saved_floats_; }

  // `src` and `dst` in the user descriptors' element types (8-bit and bf16 blobs too), the gradients in theirs.
  void Forward(float* workspace, const void* src, void* dst, float* saved);
  void Backward(float* workspace, const void* src, const void* diff_dst, void* diff_src, float* saved);

 private:
  dnnl::memory::desc user_src_, user_dst_;
  dnnl::memory::desc user_diff_src_, user_diff_dst_;  // the gradients, in their own types
  dnnl::primitive_desc_base forward_pd_, backward_pd_;
  dnnl::primitive forward_, backward_;
  bool backward_reads_src_;
  // The forward primitive's descriptors, queried once (a query costs as much as a small pooling's work).
  dnnl::memory::desc forward_src_, forward_dst_, forward_scratch_desc_, workspace_desc_;
  bool one_thread_ = false;  // the forward is small work (SmallWork, core/threads.hpp): run on one thread
  Regions regions_;
  Bindings forward_bindings_, backward_bindings_;
  size_t saved_floats_ = 0;  // of oneDNN's workspace (0: the primitives keep none)
  size_t src_ = 0, dst_ = 0, forward_scratch_ = 0, backward_src_ = 0, diff_dst_ = 0, diff_src_ = 0,
         backward_scratch_ = 0;
};

}  // namespace onednn
}  // namespace crema

#endif  // CREMA_USE_ONEDNN
