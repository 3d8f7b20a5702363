#include "layers/common/onednn_eltwise.hpp"

#ifdef CREMA_USE_ONEDNN

#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;

struct OneDnnEltwiseLayer::Primitives {
  std::vector<memory::desc> bottoms;  // in their layouts
  memory::desc top;
  dnnl::sum::primitive_desc forward;
  dnnl::sum forward_primitive;
  std::vector<dnnl::reorder> gradients;  // the top's gradient times each bottom's coefficient, in its layout
  memory::desc scratch_desc;             // the scratchpad's layout, queried once
  size_t scratch = 0;                    // oneDNN's scratchpad, in the workspace
  onednn::Bindings forward_bindings, backward_bindings;  // the memories of the last call, kept for the next
};

OneDnnEltwiseLayer::OneDnnEltwiseLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : EltwiseLayer(param, std::move(context)) {}

OneDnnEltwiseLayer::~OneDnnEltwiseLayer() = default;

std::string OneDnnEltwiseLayer::Refusal(const EngineQuery& query) {
  if (query.param.eltwise_param().operation() != EltwiseParameter::SUM) return "takes the SUM operation only";
  for (const std::vector<int>& shape : query.bottom_shapes)
    if (shape.size() != 4) return "takes 4-d bottoms only";
  return "";
}

Layout OneDnnEltwiseLayer::OffersLayout(int, const std::vector<Layout>& bottom_layouts) const {
  for (Layout layout : bottom_layouts)
    if (layout != Layout::kPlain) return layout;
  return Layout::kPlain;
}

void OneDnnEltwiseLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  EltwiseLayer::Reshape(bottom, top);  // checks the shapes and shapes the top, as the native engine does
  CREMA_CHECK(op_ == EltwiseParameter::SUM && top[0]->num_axes() == 4)
      << describe() << ": the onednn engine sums 4-d bottoms only (its refusal should have said so)";
  if (absorbs_relu()) {  // the fused loops run it (EltwiseLayer::SumReLUForward), in any element type
    primitives_.reset();
    RequestWorkspace(0);
    return;
  }
  auto p = std::make_unique<Primitives>();
  p->top = onednn::BlobDesc(*top[0]);
  for (const Blob* b : bottom) p->bottoms.push_back(onednn::BlobDesc(*b));
  p->forward = dnnl::sum::primitive_desc(p->top, coeffs_, p->bottoms, CpuEngine(), onednn::UserScratchpad());
  p->forward_primitive = dnnl::sum(p->forward);
  for (size_t b = 0; b < bottom.size(); ++b) {
    dnnl::primitive_attr scaled;
    scaled.set_output_scales(0, {coeffs_[b]});
    p->gradients.emplace_back(
        dnnl::reorder::primitive_desc(CpuEngine(), p->top, CpuEngine(), p->bottoms[b], scaled));
  }
  onednn::Regions regions;
  p->scratch_desc = p->forward.scratchpad_desc();
  p->scratch = regions.Add(p->scratch_desc);
  RequestWorkspace(regions.Floats());
  primitives_ = std::move(p);
}

void OneDnnEltwiseLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (absorbs_relu()) return EltwiseLayer::Forward_cpu(bottom, top);  // one pass, in the one layout they share
  Primitives& p = *primitives_;
  onednn::RunOnSources(p.forward_primitive, p.scratch_desc, p.bottoms, bottom, p.top, top[0]->mutable_cpu_data(),
                       workspace(), p.scratch, &p.forward_bindings);
}

void OneDnnEltwiseLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  if (absorbs_relu()) return EltwiseLayer::Backward_cpu(top, propagate_down, bottom);
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace(), &p.backward_bindings);
  const memory gradient = bind.Plain(p.top, top[0]->cpu_diff());
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (!propagate_down[b]) continue;
    onednn::RunReorder(p.gradients[b], bind.stream(), gradient,
                       bind.Plain(p.bottoms[b], bottom[b]->mutable_cpu_diff()));
  }
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
