#include "layers/normalization/onednn_batch_norm.hpp"

#ifdef CREMA_USE_ONEDNN

#include <unordered_map>

#include "core/blob_elements.hpp"
#include "core/math_functions.hpp"
#include "layers/normalization/batch_norm_affine.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;

struct OneDnnBatchNormLayer::Primitives {
  memory::desc data;                 // the bottom's layout, where the primitives work
  memory::desc user_top;             // the top's layout
  memory::desc statistics;           // mean and variance: C floats each
  dnnl::batch_normalization_forward::primitive_desc forward;
  dnnl::batch_normalization_backward::primitive_desc backward;
  dnnl::primitive forward_primitive, backward_primitive;
  size_t dst = 0, forward_scratch = 0, diff_dst = 0, backward_scratch = 0;  // workspace regions
  onednn::Bindings forward_bindings, backward_bindings;  // the memories of the last call, kept for the next
};

OneDnnBatchNormLayer::OneDnnBatchNormLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : BatchNormLayer(param, std::move(context)) {}

OneDnnBatchNormLayer::~OneDnnBatchNormLayer() = default;

std::string OneDnnBatchNormLayer::Refusal(const EngineQuery& query) {
  if (query.bottom_shapes.empty()) return "";  // the layer's arity check names it
  const std::vector<int>& shape = query.bottom_shapes.at(0);
  if (shape.size() != 4) return "takes 4-d bottoms only";
  if (shape[0] * shape[2] * shape[3] == 0) return "takes bottoms with values in every channel only";
  return "";
}

void OneDnnBatchNormLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BatchNormLayer::LayerSetUp(bottom, top);  // the native loops' buffers too, for a plain bottom
  in_place_ = top[0] == bottom[0];
  mean_ = AddInternalBlob("mean", InternalLifetime::kUntilBackward);
  variance_ = AddInternalBlob("variance", InternalLifetime::kUntilBackward);
}

void OneDnnBatchNormLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const bool plain = bottom[0]->layout() == Layout::kPlain;
  bf16_ = false;
  if (plain) {
    normalized_->set_quantization({});
    mean_->Reshape({0});
    variance_->Reshape({0});
    normalized_->set_layout(Layout::kPlain);
    primitives_.reset();
    BatchNormLayer::Reshape(bottom, top);
    return;
  }
  ReadShape(bottom, top);
  in_place_ = top[0] == bottom[0];  // the net may have given it a top of its own since (MayLeavePlace)
  CREMA_CHECK(bottom[0]->num_axes() == 4 && num_ * spatial_ > 0)
      << describe() << ": the onednn engine takes 4-d bottoms with values in every channel (its refusal should "
      << "have said so), not " << bottom[0]->shape_string();
  // What an in-place backward reads: none out of place, or where no backward will run. With a Scale fused, the
  // normalized values are where the primitive writes (AffineForward then writes the top from them).
  const bool keep_normalized = (in_place_ && backward_planned()) || absorbs_affine();
  CREMA_CHECK(!absorbs_affine() || top[0]->layout() == bottom[0]->layout())
      << describe() << ": with a Scale fused, the top must be in the bottom's layout ("
      << LayoutName(bottom[0]->layout()) << "), not " << LayoutName(top[0]->layout());
  bf16_ = absorbs_affine() && requested_precision() == Precision::kBfloat16 && onednn::HasBfloat16Kernels();
  normalized_->set_quantization(bf16_ ? Quantization{ElementType::kBfloat16, 1.f} : Quantization{});
  normalized_->Reshape(keep_normalized ? bottom[0]->shape() : std::vector<int>{0});
  normalized_->set_layout(bottom[0]->layout());
  inv_std_->Reshape({keep_normalized ? channels_ : 0});
  mean_->Reshape({channels_});
  variance_->Reshape({channels_});
  auto p = std::make_unique<Primitives>();
  p->data = onednn::BlobDesc(*bottom[0]);
  p->user_top = onednn::BlobDesc(*top[0]);
  p->statistics = memory::desc({channels_}, memory::data_type::f32, memory::format_tag::x);
  const auto flags = use_global_stats_ ? dnnl::normalization_flags::use_global_stats : dnnl::normalization_flags::none;
  onednn::Regions regions;
  if (!bf16_) {  // the bf16 rule runs its own loops
    p->forward = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, p->data, eps_, flags),
        onednn::UserScratchpad(), CpuEngine());
    p->forward_primitive = dnnl::batch_normalization_forward(p->forward);
    if (!absorbs_affine()) p->dst = regions.AddCopy(p->data, p->user_top);  // else the loops write the top
    p->forward_scratch = regions.Add(p->forward.scratchpad_desc());
  }
  if (!in_place_ && !absorbs_affine()) {  // in place, or with a Scale fused, backward runs the native rule
    p->backward = dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward_data, p->data, p->data, eps_, flags),
        onednn::UserScratchpad(), CpuEngine(), p->forward);
    p->backward_primitive = dnnl::batch_normalization_backward(p->backward);
    regions.Restart();
    p->diff_dst = regions.AddCopy(p->data, p->user_top);
    p->backward_scratch = regions.Add(p->backward.scratchpad_desc());
  }
  RequestWorkspace(regions.Floats());
  primitives_ = std::move(p);
}

void OneDnnBatchNormLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (!primitives_) return BatchNormLayer::Forward_cpu(bottom, top);
  if (bf16_) {
    float* mean = mean_->mutable_cpu_data();
    float* variance = variance_->mutable_cpu_data();
    if (use_global_stats_) {
      StoredStatistics(mean, variance);
    } else {
      const ChannelGrid grid{num_, channels_, spatial_, ChannelBlock(bottom[0]->layout(), channels_)};
      WithData(*bottom[0], [&](const auto* x) { Bfloat16StatisticsLoops(grid, x, mean, variance); });
      UpdateStatistics(mean, variance);
    }
    InverseDeviations(variance, inv_std_->mutable_cpu_data());
    return Bfloat16Forward(*bottom[0], mean, inv_std_->cpu_data(), top[0]);
  }
  Primitives& p = *primitives_;
  // In place, src and dst are one buffer (oneDNN allows it).
  const float* x = bottom[0]->cpu_data();
  if (use_global_stats_) StoredStatistics(mean_->mutable_cpu_data(), variance_->mutable_cpu_data());
  onednn::Binder bind(workspace(), &p.forward_bindings);
  // With a Scale fused, the primitive writes the normalized values, and the loops the top from them.
  const memory result = absorbs_affine() ? bind.Plain(p.data, normalized_->mutable_cpu_data())
                                         : bind.Result(p.user_top, top[0]->mutable_cpu_data(), p.data, p.dst);
  onednn::Args({{DNNL_ARG_SRC, bind.Plain(p.data, x)},
                {DNNL_ARG_DST, result},
                {DNNL_ARG_MEAN, bind.Plain(p.statistics, mean_->mutable_cpu_data())},
                {DNNL_ARG_VARIANCE, bind.Plain(p.statistics, variance_->mutable_cpu_data())},
                {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.forward.scratchpad_desc(), p.forward_scratch)}})
      .Run(p.forward_primitive, bind.stream());
  if (!absorbs_affine()) bind.Out(result, p.user_top, top[0]->mutable_cpu_data());
  bind.stream().wait();
  // oneDNN's variance is the biased one, as the native engine's batch statistic.
  if (!use_global_stats_) UpdateStatistics(mean_->cpu_data(), variance_->cpu_data());
  if (absorbs_affine()) {
    InverseDeviations(variance_->cpu_data(), inv_std_->mutable_cpu_data());
    return AffineForward(top[0]);
  }
  if (in_place_ && backward_planned()) {
    // What the in-place backward reads: the normalized values (the top, in its layout) and 1 / sqrt(var + eps).
    cpu_copy(top[0]->count(), top[0]->cpu_data(), normalized_->mutable_cpu_data());
    InverseDeviations(variance_->cpu_data(), inv_std_->mutable_cpu_data());
  }
}

void OneDnnBatchNormLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  // The blobs get no gradient: they are statistics, not parameters.
  if (!primitives_ || absorbs_affine()) return BatchNormLayer::Backward_cpu(top, propagate_down, bottom);
  if (!propagate_down[0]) return;
  if (in_place_) {
    // dx overwrites dy: the rule reads a channel block's gradients before writing them.
    return BackwardLoops(*top[0], true, bottom[0]);
  }
  Primitives& p = *primitives_;
  const float* x = bottom[0]->cpu_data();
  onednn::Binder bind(workspace(), &p.backward_bindings);
  onednn::Args({{DNNL_ARG_SRC, bind.Plain(p.data, x)},
                {DNNL_ARG_MEAN, bind.Plain(p.statistics, mean_->cpu_data())},
                {DNNL_ARG_VARIANCE, bind.Plain(p.statistics, variance_->cpu_data())},
                {DNNL_ARG_DIFF_DST, bind.In(p.user_top, top[0]->cpu_diff(), p.data, p.diff_dst)},
                {DNNL_ARG_DIFF_SRC, bind.Plain(p.data, bottom[0]->mutable_cpu_diff())},
                {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward.scratchpad_desc(), p.backward_scratch)}})
      .Run(p.backward_primitive, bind.stream());
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
