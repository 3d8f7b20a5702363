#include "layers/common/onednn_inner_product.hpp"

#ifdef CREMA_USE_ONEDNN

#include <unordered_map>

#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::CpuEngine;
using onednn::Dims;

// Weights from this many values on (1 MiB) are read from memory rather than from the caches, and the primitive over
// weights reordered once pays; below, oneDNN's primitive with its scratchpad brings nothing the matrix product lacks.
constexpr int64_t kLargeWeights = int64_t{1} << 18;

struct OneDnnInnerProductLayer::Primitive {
  memory::desc src, user_weights, bias, dst;
  dnnl::inner_product_forward::primitive_desc forward;
  dnnl::primitive primitive;
  onednn::WeightCache weights;
  memory::desc scratch_desc;  // queried once
  onednn::Bindings bindings;  // the memories of the last call, kept for the next
  size_t scratch = 0;
};

OneDnnInnerProductLayer::OneDnnInnerProductLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : InnerProductLayer(param, std::move(context)) {}

OneDnnInnerProductLayer::~OneDnnInnerProductLayer() = default;

std::vector<Layer::HeldBuffer> OneDnnInnerProductLayer::HeldBuffers() const {
  if (!primitive_ || primitive_->weights.bytes() == 0) return {};
  return {{"weights in oneDNN's layout", primitive_->weights.bytes(), Device::kCPU}};
}

bool OneDnnInnerProductLayer::ComputesFusedActivation() const {
  return primitive_ != nullptr && fused_activation_.kind != FusedActivation::kNone;
}

void OneDnnInnerProductLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  InnerProductLayer::Reshape(bottom, top);  // M_, K_, N_ and the top's shape
  if (backward_planned() || fused_sum() || static_cast<int64_t>(N_) * K_ < kLargeWeights) {
    primitive_.reset();  // the native matrix products
    return;
  }
  auto p = std::make_unique<Primitive>();
  if (primitive_) p->weights = std::move(primitive_->weights);  // kept while the layout stays the same
  const auto f32 = memory::data_type::f32;
  // The bottom as M x K, the top as M x N, both plain; the weights N x K, or K x N with transpose (oneDNN's
  // outputs-by-inputs read in the other order).
  p->src = memory::desc(Dims({M_, K_}), f32, Tag::nc);
  p->dst = memory::desc(Dims({M_, N_}), f32, Tag::nc);
  p->user_weights = memory::desc(Dims({N_, K_}), f32, transpose_ ? Tag::io : Tag::oi);
  p->bias = memory::desc(Dims({N_}), f32, Tag::x);
  const memory::desc any_weights(Dims({N_, K_}), f32, Tag::any);
  p->forward = dnnl::inner_product_forward::primitive_desc(
      dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, p->src, any_weights,
                                        bias_term_ ? p->bias : memory::desc(), p->dst),
      onednn::UserScratchpadWith(fused_activation_), CpuEngine());
  p->primitive = dnnl::primitive(p->forward.get());
  p->weights.Describe(p->forward.weights_desc(), p->user_weights);
  onednn::Regions regions;
  p->scratch_desc = p->forward.scratchpad_desc();
  p->scratch = regions.Add(p->scratch_desc);
  RequestWorkspace(regions.Floats());
  primitive_ = std::move(p);
}

void OneDnnInnerProductLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (!primitive_) {
    InnerProductLayer::Forward_any(bottom, top);
    return;
  }
  Primitive& p = *primitive_;
  onednn::Binder bind(workspace(), &p.bindings);
  onednn::Args args = {{DNNL_ARG_SRC, bind.Plain(p.src, bottom[0]->cpu_data())},
                       {DNNL_ARG_WEIGHTS, p.weights.Get(*params_[0], bind.stream())},
                       {DNNL_ARG_DST, bind.Plain(p.dst, top[0]->mutable_cpu_data())},
                       {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.scratch_desc, p.scratch)}};
  if (bias_term_) args[DNNL_ARG_BIAS] = bind.Plain(p.bias, params_[1]->cpu_data());
  args.Run(p.primitive, bind.stream());
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
