#include "layers/common/onednn_inner_product.hpp"

#ifdef CREMA_USE_ONEDNN

#include <glog/logging.h>

#include <mutex>
#include <unordered_map>

#include "core/math_functions.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::CpuEngine;
using onednn::Dims;

// Weights from this many values on (1 MiB) are read from memory rather than from the caches, and the primitive over
// weights reordered once pays; below, oneDNN's primitive with its scratchpad brings nothing the matrix product lacks.
constexpr int64_t kLargeWeights = int64_t{1} << 18;
// The rows (batch items) from which an inner product computing in bf16 computes its weights' gradient in bf16 too:
// below, each weight meets too few rows for the products to be bound by arithmetic, so they are bound by reading and
// writing the float32 gradient, and oneDNN's bf16 primitive, which writes a gradient of its own layout into the
// workspace to be added to the blob's, moves it three times more: the native float32 product adds into the diff as it
// computes. The same rows decide whether a layer over large weights computes in bf16 at all where its bf16 weights
// cannot be written by the solver's update (a layout crema does not write, transposed weights): then the bf16 copy,
// made again after every update, costs more than its halved reads save (over CaffeNet's fc6 at 10 rows on a Zen 5,
// oneDNN's reorder took 19 ms a pass, the float32 forward 4.5 ms and the bf16 one 1.6 ms; docs/performance.md). Rules,
// not measurements, so that a run and its resumption compute alike.
constexpr int kBfloat16Rows = 32;

struct OneDnnInnerProductLayer::Primitive {
  memory::desc src, user_weights, bias, dst;
  dnnl::inner_product_forward::primitive_desc forward;
  dnnl::primitive primitive;
  onednn::WeightCache weights;
  memory::desc scratch_desc;  // queried once
  onednn::Bindings bindings;  // the memories of the last call, kept for the next
  size_t scratch = 0;
  // 8-bit inference (QuantizationParameter), as the convolution's engine does it: the input quantized into the
  // workspace (`quantized_src`, at `quantized`), the weights by `int8_weights`, the primitive made again for new
  // weights (its output scales follow them).
  bool int8 = false;
  memory::desc int8_src, quantized_src;
  bool src_quantized = false;  // the bottom is kept in 8 bits by the plan (plan_element_types): read as it lies
  float top_scale = 1.f;       // the top's scale where the plan keeps it in 8 bits, else 1: the output scales' factor
  dnnl::reorder quantize_src;
  onednn::Int8Weights int8_weights;
  size_t quantized = 0;
  // bfloat16 (Layer::requested_precision, where this CPU has the kernels): the primitive reads bf16 copies of the input
  // (reordered into the workspace at `src_copy`) and of the weights (WeightCache), and writes float32; with a backward
  // pass planned, the gradients' primitives read bf16 copies of the output gradient and write float32 gradients, the
  // weights' and the bias's computed into the workspace and added to the blobs' diffs.
  Precision precision = Precision::kFloat32;
  size_t src_copy = 0;
  bool with_backward = false;
  dnnl::inner_product_backward_data::primitive_desc backward_data;
  dnnl::inner_product_backward_weights::primitive_desc backward_weights;
  dnnl::primitive backward_data_primitive, backward_weights_primitive;
  onednn::Bindings backward_bindings;
  size_t weights_src = 0, weights_diff_dst = 0, computed_diff_weights = 0, diff_weights = 0, diff_bias = 0,
         weights_scratch = 0;
  size_t data_weights = 0, data_diff_dst = 0, diff_src = 0, data_scratch = 0;
  bool data_reads_cached = false;  // the input gradient's primitive reads the weights in the forward's layout
  // Whether the weights' and the bias's gradients come from oneDNN's bf16 primitive (from kBfloat16Rows rows), else
  // from the native float32 products.
  bool bf16_weight_gradient = false;
};

// The bfloat16 primitives for the shapes as they are (Primitive says what each reads and writes), their workspace
// regions in `regions`.
void OneDnnInnerProductLayer::MakeHalfPrecision(Primitive* p, onednn::Regions* regions) const {
  const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  const memory::desc half_src(Dims({M_, K_}), bf16, Tag::nc), half_dst(Dims({M_, N_}), bf16, Tag::nc);
  const memory::desc half_weights(Dims({N_, K_}), bf16, Tag::any), float_weights(Dims({N_, K_}), f32, Tag::any);
  const memory::desc no_bias;
  const bool backward = backward_planned();
  p->forward = dnnl::inner_product_forward::primitive_desc(
      dnnl::inner_product_forward::desc(
          backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, half_src, half_weights,
          bias_term_ ? p->bias : no_bias, p->dst),
      onednn::UserScratchpadWith(fused_activation_), CpuEngine());
  p->src_copy = regions->AddCopy(p->forward.src_desc(), p->src);
  p->scratch_desc = p->forward.scratchpad_desc();
  p->scratch = regions->Add(p->scratch_desc);
  if (!backward) return;
  const dnnl::primitive_attr attr = onednn::UserScratchpad();
  p->bf16_weight_gradient = M_ >= kBfloat16Rows;
  if (p->bf16_weight_gradient) {
    p->backward_weights = dnnl::inner_product_backward_weights::primitive_desc(
        bias_term_ ? dnnl::inner_product_backward_weights::desc(half_src, float_weights, p->bias, half_dst)
                   : dnnl::inner_product_backward_weights::desc(half_src, float_weights, half_dst),
        attr, CpuEngine(), p->forward);
    p->backward_weights_primitive = dnnl::primitive(p->backward_weights.get());
  }
  p->backward_data = dnnl::inner_product_backward_data::primitive_desc(
      dnnl::inner_product_backward_data::desc(p->src, half_weights, half_dst), attr, CpuEngine(), p->forward);
  p->backward_data_primitive = dnnl::primitive(p->backward_data.get());
  p->with_backward = true;
  // The forward, the weights' gradient and the input's run one after another, each with the workspace afresh.
  regions->Restart();
  if (p->bf16_weight_gradient) {
    p->weights_src = regions->AddCopy(p->backward_weights.src_desc(), p->src);
    p->weights_diff_dst = regions->AddCopy(p->backward_weights.diff_dst_desc(), p->dst);
    p->computed_diff_weights = regions->AddCopy(p->backward_weights.diff_weights_desc(), p->user_weights);
    p->diff_weights = regions->Add(p->user_weights);
    p->diff_bias = regions->Add(p->bias);
    p->weights_scratch = regions->Add(p->backward_weights.scratchpad_desc());
    regions->Restart();
  }
  p->data_reads_cached = p->backward_data.weights_desc() == p->forward.weights_desc();
  if (!p->data_reads_cached) p->data_weights = regions->AddCopy(p->backward_data.weights_desc(), p->user_weights);
  p->data_diff_dst = regions->AddCopy(p->backward_data.diff_dst_desc(), p->dst);
  p->diff_src = regions->AddCopy(p->backward_data.diff_src_desc(), p->src);
  p->data_scratch = regions->Add(p->backward_data.scratchpad_desc());
}

// The 8-bit primitive for the weights and bias as they are now, their quantized copy placed in its layout.
void OneDnnInnerProductLayer::MakeInt8Forward(Primitive* p) const {
  const Blob* bias = bias_term_ ? params_[1].get() : nullptr;
  // Output n's weights: a row of K (N x K), or a column of the K x N transpose.
  p->int8_weights.Quantize(*params_[0], bias, N_, transpose_ ? 1 : K_, transpose_ ? N_ : 1,
                           layer_param().quantization().input_scale(), describe());
  dnnl::primitive_attr attr = onednn::UserScratchpadWith(fused_activation_);
  attr.set_output_scales(1 << 1, p->int8_weights.OutputScales(p->top_scale));
  const dnnl::inner_product_forward::primitive_desc pd(
      dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, p->int8_src,
                                        memory::desc(Dims({N_, K_}), memory::data_type::s8, Tag::any),
                                        bias ? p->bias : memory::desc(), p->dst),
      attr, CpuEngine());
  if (p->int8) onednn::CheckRemadeKeepsLayouts(p->forward, pd, describe());
  p->forward = pd;
  p->primitive = dnnl::primitive(p->forward.get());
  p->int8_weights.Place(memory::desc(Dims({N_, K_}), memory::data_type::s8, Tag::oi), p->forward.weights_desc());
}

OneDnnInnerProductLayer::OneDnnInnerProductLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : InnerProductLayer(param, std::move(context)) {}

OneDnnInnerProductLayer::~OneDnnInnerProductLayer() = default;

std::vector<Layer::HeldBuffer> OneDnnInnerProductLayer::HeldBuffers() const {
  if (primitive_ && primitive_->int8)
    return {{"weights quantized to 8 bits for oneDNN", primitive_->int8_weights.bytes(), Device::kCPU}};
  if (!primitive_ || primitive_->weights.bytes() == 0) return {};
  return {{"weights in oneDNN's layout", primitive_->weights.bytes(), Device::kCPU}};
}

bool OneDnnInnerProductLayer::ComputesFusedActivation() const {
  return primitive_ != nullptr && fused_activation_.kind != FusedActivation::kNone;
}

bool OneDnnInnerProductLayer::runs_int8() const { return primitive_ && primitive_->int8; }

Quantization OneDnnInnerProductLayer::ReadsQuantized(int bottom) const {
  return onednn::Int8Reads(*this, runs_int8(), bottom);
}

bool OneDnnInnerProductLayer::WritesQuantized(int top, ElementType type) const {
  return type != ElementType::kBfloat16 && onednn::Int8Writes(*this, runs_int8(), top);
}

void OneDnnInnerProductLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  InnerProductLayer::Reshape(bottom, top);  // M_, K_, N_ and the top's shape
  // 8 bits wherever the net runs forward only and oneDNN has the kernels (else float, said once).
  const bool set_to_int8 = !backward_planned() && !fused_sum() && layer_param().has_quantization();
  if (set_to_int8) QuantizationOf(layer_param().quantization(), describe());  // a bad setting is named on any CPU
  const bool int8 = set_to_int8 && onednn::Int8Allowed(*this);
  // bfloat16 where asked for and this CPU has the kernels, in training too; not with a fused sum (a post-op the
  // native products take: the inference rewrites'), which stays in float32.
  const Precision precision = int8 || fused_sum() ? Precision::kFloat32 : onednn::EnginePrecision(*this);
  // In float32, the native matrix products serve training, a fused sum, small weights, and one item (a matrix-vector
  // product over the weights on every thread, core/few_rows_gemm.hpp: CaffeNet's fc6 at batch 1 took 7.3-8.0 ms on
  // oneDNN's primitive, 5.7 so). From two items on, neither won throughout: on the Xeon of docs/performance.md the
  // native products were ahead on fc6 and oneDNN's primitive, over its own layout of the weights, on fc7.
  const bool native_in_float =
      backward_planned() || fused_sum() || static_cast<int64_t>(N_) * K_ < kLargeWeights || M_ == 1;
  if (!int8 && precision == Precision::kFloat32 && native_in_float) {
    primitive_.reset();
    return;
  }
  auto p = std::make_unique<Primitive>();
  if (primitive_) p->weights = std::move(primitive_->weights);  // kept while the layout stays the same
  const auto f32 = memory::data_type::f32;
  // The bottom as M x K, the top as M x N, both plain; the weights N x K, or K x N with transpose (oneDNN's
  // outputs-by-inputs read in the other order).
  p->src = memory::desc(Dims({M_, K_}), f32, Tag::nc);
  p->dst = memory::desc(Dims({M_, N_}), onednn::DataTypeOf(top[0]->data_type()), Tag::nc);  // 8 bits where planned
  p->user_weights = memory::desc(Dims({N_, K_}), f32, transpose_ ? Tag::io : Tag::oi);
  p->bias = memory::desc(Dims({N_}), f32, Tag::x);
  onednn::Regions regions;
  if (int8) {
    try {
      const bool unsigned_input = layer_param().quantization().input_unsigned();
      p->int8_src =
          memory::desc(Dims({M_, K_}), unsigned_input ? memory::data_type::u8 : memory::data_type::s8, Tag::nc);
      p->top_scale = top[0]->quantization().integers() ? top[0]->quantization().scale : 1.f;
      MakeInt8Forward(p.get());
      p->int8 = true;
      p->quantized_src = p->forward.src_desc();
      // A bottom the plan keeps in 8 bits is read as it lies; a float one is quantized into the workspace.
      p->src_quantized = bottom[0]->quantization().integers();
      if (!p->src_quantized) {
        p->quantize_src =
            onednn::QuantizingReorder(p->src, p->quantized_src, layer_param().quantization().input_scale());
        p->quantized = regions.Add(p->quantized_src);
      }
      p->scratch_desc = p->forward.scratchpad_desc();
      p->scratch = regions.Add(p->scratch_desc);
      RequestWorkspace(regions.Floats());
      primitive_ = std::move(p);
      return;
    } catch (const dnnl::error& error) {
      onednn::WarnInt8Refused(describe(), error.what());
      p->int8 = false;
    }
  }
  CREMA_CHECK(!bottom[0]->quantization().integers() && !top[0]->quantization().integers())
      << describe() << ": its blobs were planned in 8 bits, but it computes in float here";
  if (precision != Precision::kFloat32) {
    try {
      MakeHalfPrecision(p.get(), &regions);
      p->precision = precision;
    } catch (const dnnl::error& error) {
      onednn::WarnHalfRefused(describe(), precision, error.what());
    }
    // Over large weights at few rows, bf16 pays only where the solver's update writes the bf16 weights.
    PairBlockedLayout layout;
    if (p->precision != Precision::kFloat32 && backward_planned() && M_ < kBfloat16Rows &&
        static_cast<int64_t>(N_) * K_ >= kLargeWeights &&
        !(onednn::WritesDerivedWeights() &&
          onednn::PairBlockedLayoutOf(p->forward.weights_desc(), p->user_weights, &layout))) {
      p->precision = Precision::kFloat32;
      static std::once_flag once;
      std::call_once(once, [&] {
        LOG(INFO) << describe() << " computes in float32, though set to bfloat16: at " << M_ << " rows (under "
                  << kBfloat16Rows << ") through " << N_ << " x " << K_ << " weights"
                  << (transpose_ ? " (transposed)" : "")
                  << " that crema cannot keep in bf16 as it updates them, the float32 products are faster; other such "
                     "layers of this run are not named";
      });
    }
    if (p->precision == Precision::kFloat32) {
      regions = onednn::Regions();
      p->with_backward = false;
      if (native_in_float) {
        primitive_.reset();
        return;
      }
    }
  }
  if (p->precision == Precision::kFloat32) {  // inference over large weights, or 8 bits refused
    const memory::desc any_weights(Dims({N_, K_}), f32, Tag::any);
    p->forward = dnnl::inner_product_forward::primitive_desc(
        dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, p->src, any_weights,
                                          bias_term_ ? p->bias : memory::desc(), p->dst),
        onednn::UserScratchpadWith(fused_activation_), CpuEngine());
    p->scratch_desc = p->forward.scratchpad_desc();
    p->scratch = regions.Add(p->scratch_desc);
  }
  p->primitive = dnnl::primitive(p->forward.get());
  p->weights.Describe(p->forward.weights_desc(), p->user_weights);
  // bf16 weights in a layout crema writes: registered with the blob, so that the solver's update writes them.
  if (p->precision == Precision::kBfloat16) p->weights.DeriveFrom(params_[0].get());
  RequestWorkspace(regions.Floats());
  primitive_ = std::move(p);
}

void OneDnnInnerProductLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (!primitive_) {
    InnerProductLayer::Forward_any(bottom, top);
    return;
  }
  Primitive& p = *primitive_;
  const Blob* bias = bias_term_ ? params_[1].get() : nullptr;
  if (p.int8 && p.int8_weights.Stale(*params_[0], bias)) MakeInt8Forward(&p);
  onednn::Binder bind(workspace(), &p.bindings);
  memory src = p.src_quantized ? bind.Plain(p.quantized_src, bottom[0]->cpu_bytes())
               : p.precision != Precision::kFloat32
                   ? bind.In(p.src, bottom[0]->cpu_data(), p.forward.src_desc(), p.src_copy)
                   : bind.Plain(p.src, bottom[0]->cpu_data());
  if (p.int8 && !p.src_quantized) {  // quantized into the workspace
    const memory quantized = bind.Scratch(p.quantized_src, p.quantized);
    onednn::RunReorder(p.quantize_src, bind.stream(), src, quantized);
    src = quantized;
  }
  onednn::Args args = {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_WEIGHTS, p.int8 ? p.int8_weights.placed() : p.weights.Get(*params_[0], bind.stream())},
                       {DNNL_ARG_DST, bind.Plain(p.dst, top[0]->mutable_cpu_bytes())},
                       {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.scratch_desc, p.scratch)}};
  if (bias) args[DNNL_ARG_BIAS] = bind.Plain(p.bias, p.int8 ? p.int8_weights.scaled_bias().data() : bias->cpu_data());
  args.Run(p.primitive, bind.stream());
  bind.stream().wait();
}

void OneDnnInnerProductLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                           const std::vector<Blob*>& bottom) {
  if (!primitive_ || primitive_->precision == Precision::kFloat32) {
    InnerProductLayer::Backward_any(top, propagate_down, bottom);
    return;
  }
  Primitive& p = *primitive_;
  CREMA_CHECK(p.with_backward) << describe() << ": its primitives were made for forward passes only (no backward "
                               << "planned); plan the backward pass before running it";
  const bool weight_grad = param_propagate_down(0), bias_grad = bias_term_ && param_propagate_down(1);
  onednn::Binder bind(workspace(), &p.backward_bindings);
  const float* top_diff = top[0]->cpu_diff();
  if (!p.bf16_weight_gradient) ParameterGradients(top, bottom);
  if (p.bf16_weight_gradient && (weight_grad || bias_grad)) {
    const memory diff_weights = bind.Result(p.user_weights, bind.At(p.diff_weights),
                                            p.backward_weights.diff_weights_desc(), p.computed_diff_weights);
    onednn::Args args = {
        {DNNL_ARG_SRC, bind.In(p.src, bottom[0]->cpu_data(), p.backward_weights.src_desc(), p.weights_src)},
        {DNNL_ARG_DIFF_DST, bind.In(p.dst, top_diff, p.backward_weights.diff_dst_desc(), p.weights_diff_dst)},
        {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
        {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward_weights.scratchpad_desc(), p.weights_scratch)}};
    if (bias_term_) args[DNNL_ARG_DIFF_BIAS] = bind.Plain(p.bias, bind.At(p.diff_bias));
    args.Run(p.backward_weights_primitive, bind.stream());
    bind.Out(diff_weights, p.user_weights, bind.At(p.diff_weights));
    bind.stream().wait();
    // Gradients accumulate (the net zeroes them before a backward), or are written where the net left their zeroing
    // to this backward.
    const auto add = [&](int index, const float* computed) {
      Blob& param = *params_[index];
      if (ParamGradientKeep(index) == 0.f) {
        cpu_copy(param.count(), computed, param.mutable_cpu_diff());
      } else {
        cpu_axpy(param.count(), 1.f, computed, param.mutable_cpu_diff());
      }
    };
    if (weight_grad) add(0, bind.At(p.diff_weights));
    if (bias_grad) add(1, bind.At(p.diff_bias));
  }
  if (propagate_down[0]) {
    float* input_diff = bottom[0]->mutable_cpu_diff();
    // Over the bf16 copy crema writes, crema's product in its layout (Bfloat16BlockedCopy::InputGradient).
    if (p.weights.derived()) {
      p.weights.Get(*params_[0], bind.stream());  // current
      if (p.weights.derived_copy().InputGradient(top_diff, M_, input_diff)) return;
    }
    const memory diff_src = bind.Result(p.src, input_diff, p.backward_data.diff_src_desc(), p.diff_src);
    onednn::Args({{DNNL_ARG_DIFF_DST, bind.In(p.dst, top_diff, p.backward_data.diff_dst_desc(), p.data_diff_dst)},
                  {DNNL_ARG_WEIGHTS, p.data_reads_cached ? p.weights.Get(*params_[0], bind.stream())
                                                         : bind.In(p.user_weights, params_[0]->cpu_data(),
                                                                   p.backward_data.weights_desc(), p.data_weights)},
                  {DNNL_ARG_DIFF_SRC, diff_src},
                  {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward_data.scratchpad_desc(), p.data_scratch)}})
        .Run(p.backward_data_primitive, bind.stream());
    bind.Out(diff_src, p.src, input_diff);
    bind.stream().wait();
  }
}

std::string OneDnnInnerProductLayer::engine_note() const {
  if (runs_int8()) return "8-bit integers";
  if (computes_in() == Precision::kFloat32) return "";
  const Primitive& p = *primitive_;
  return PrecisionName(p.precision) +
         std::string(p.with_backward && !p.bf16_weight_gradient ? ", the weights' gradient in float32" : "") +
         (p.weights.derived() ? ", its weights' bf16 copy written by the update" : "");
}

Precision OneDnnInnerProductLayer::computes_in() const {
  return primitive_ ? primitive_->precision : Precision::kFloat32;
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
