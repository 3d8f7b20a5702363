#include "layers/common/onednn_concat.hpp"

#ifdef CREMA_USE_ONEDNN

#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;

struct OneDnnConcatLayer::Primitives {
  std::vector<memory::desc> bottoms;  // in their layouts
  std::vector<memory::desc> parts;    // each bottom's part of the top (sub-memories of the top's layout)
  dnnl::concat::primitive_desc forward;
  dnnl::concat forward_primitive;
  memory::desc top, scratch_desc;                        // the top's layout and the scratchpad's, queried once
  size_t scratch = 0;                                    // oneDNN's scratchpad, in the workspace
  onednn::Bindings forward_bindings, backward_bindings;  // the memories of the last call, kept for the next
};

OneDnnConcatLayer::OneDnnConcatLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : ConcatLayer(param, std::move(context)) {}

OneDnnConcatLayer::~OneDnnConcatLayer() = default;

std::string OneDnnConcatLayer::Refusal(const EngineQuery& query) {
  for (const std::vector<int>& shape : query.bottom_shapes)
    if (shape.size() != 4) return "takes 4-d bottoms only";
  const ConcatParameter& param = query.param.concat_param();
  const int axis = param.has_concat_dim() ? static_cast<int>(param.concat_dim())
                                          : (param.axis() < 0 ? param.axis() + 4 : param.axis());
  if (axis != 1) return "joins along the channel axis (1) only";
  return "";
}

Layout OneDnnConcatLayer::OffersLayout(int, const std::vector<Layout>& bottom_layouts) const {
  for (Layout layout : bottom_layouts)
    if (layout != bottom_layouts[0]) return Layout::kPlain;
  return bottom_layouts[0];
}

void OneDnnConcatLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ConcatLayer::Reshape(bottom, top);  // checks the bottoms and shapes the top, as the native engine does
  CREMA_CHECK(axis_ == 1 && top[0]->num_axes() == 4)
      << describe() << ": the onednn engine joins 4-d bottoms along axis 1 (its refusal should have said so)";
  auto p = std::make_unique<Primitives>();
  const memory::desc whole = onednn::BlobDesc(*top[0]);
  int channel = 0;
  for (const Blob* b : bottom) {
    p->bottoms.push_back(onednn::BlobDesc(*b));
    p->parts.push_back(whole.submemory_desc(onednn::Dims({b->shape(0), b->shape(1), b->shape(2), b->shape(3)}),
                                            onednn::Dims({0, channel, 0, 0})));
    channel += b->shape(1);
  }
  p->forward = dnnl::concat::primitive_desc(whole, 1, p->bottoms, CpuEngine(), onednn::UserScratchpad());
  p->forward_primitive = dnnl::concat(p->forward);
  onednn::Regions regions;
  p->top = p->forward.dst_desc();
  p->scratch_desc = p->forward.scratchpad_desc();
  p->scratch = regions.Add(p->scratch_desc);
  RequestWorkspace(regions.Floats());
  primitives_ = std::move(p);
}

void OneDnnConcatLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Primitives& p = *primitives_;
  onednn::RunOnSources(p.forward_primitive, p.scratch_desc, p.bottoms, bottom, p.top, top[0]->mutable_cpu_data(),
                       workspace(), p.scratch, &p.forward_bindings);
}

void OneDnnConcatLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace(), &p.backward_bindings);
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (!propagate_down[b]) continue;
    const memory part = bind.Plain(p.parts[b], top[0]->cpu_diff());
    const memory gradient = bind.Plain(p.bottoms[b], bottom[b]->mutable_cpu_diff());
    onednn::RunReorder(onednn::Reorder(p.parts[b], p.bottoms[b]), bind.stream(), part, gradient);
  }
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
