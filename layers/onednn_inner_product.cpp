#include "layers/onednn_inner_product.hpp"

#ifdef CREMA_USE_ONEDNN

#include <unordered_map>

#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;

struct OneDnnInnerProductLayer::Primitives {
  memory::desc input, weights, bias, output;  // M x K, N x K (K x N transposed), N, M x N: crema's own buffers
  dnnl::inner_product_forward::primitive_desc forward;
  dnnl::inner_product_backward_data::primitive_desc backward_data;
  dnnl::primitive forward_primitive, backward_data_primitive;
  size_t forward_scratch = 0, backward_scratch = 0;  // workspace regions
};

OneDnnInnerProductLayer::OneDnnInnerProductLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : InnerProductLayer(param, std::move(context)) {}

OneDnnInnerProductLayer::~OneDnnInnerProductLayer() = default;

void OneDnnInnerProductLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  InnerProductLayer::Reshape(bottom, top);  // checks the bottom and shapes the top, as the native engine does
  auto p = std::make_unique<Primitives>();
  using Tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  p->input = memory::desc({M_, K_}, f32, Tag::nc);
  p->weights = memory::desc({N_, K_}, f32, transpose_ ? Tag::io : Tag::oi);
  p->bias = memory::desc({N_}, f32, Tag::x);
  p->output = memory::desc({M_, N_}, f32, Tag::nc);
  const auto forward_desc =
      bias_term_ ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, p->input, p->weights, p->bias,
                                                     p->output)
                 : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, p->input, p->weights, p->output);
  p->forward = dnnl::inner_product_forward::primitive_desc(forward_desc, onednn::UserScratchpad(), CpuEngine());
  p->backward_data = dnnl::inner_product_backward_data::primitive_desc(
      dnnl::inner_product_backward_data::desc(p->input, p->weights, p->output), onednn::UserScratchpad(), CpuEngine(),
      p->forward);
  // Both work on crema's buffers as they are: any other layout choice would be a reorder per pass.
  CREMA_CHECK(p->forward.weights_desc() == p->weights && p->backward_data.weights_desc() == p->weights)
      << describe() << ": oneDNN's inner product asks for its weights in another layout";
  p->forward_primitive = dnnl::inner_product_forward(p->forward);
  p->backward_data_primitive = dnnl::inner_product_backward_data(p->backward_data);
  onednn::Regions regions;
  p->forward_scratch = regions.Add(p->forward.scratchpad_desc());
  regions.Restart();
  p->backward_scratch = regions.Add(p->backward_data.scratchpad_desc());
  RequestWorkspace(regions.Floats());
  primitives_ = std::move(p);
}

void OneDnnInnerProductLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace());
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, bind.Plain(p.input, bottom[0]->cpu_data())},
      {DNNL_ARG_WEIGHTS, bind.Plain(p.weights, blobs_[0]->cpu_data())},
      {DNNL_ARG_DST, bind.Plain(p.output, top[0]->mutable_cpu_data())},
      {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.forward.scratchpad_desc(), p.forward_scratch)}};
  if (bias_term_) args[DNNL_ARG_BIAS] = bind.Plain(p.bias, blobs_[1]->cpu_data());
  p.forward_primitive.execute(bind.stream(), args);
  bind.stream().wait();
}

void OneDnnInnerProductLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                           const std::vector<Blob*>& bottom) {
  // The parameters' gradients, accumulating, by the native engine's BLAS calls; the input's by oneDNN.
  InnerProductLayer::Backward_cpu(top, {false}, bottom);
  if (!propagate_down[0]) return;
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace());
  p.backward_data_primitive.execute(
      bind.stream(), {{DNNL_ARG_DIFF_DST, bind.Plain(p.output, top[0]->cpu_diff())},
                      {DNNL_ARG_WEIGHTS, bind.Plain(p.weights, blobs_[0]->cpu_data())},
                      {DNNL_ARG_DIFF_SRC, bind.Plain(p.input, bottom[0]->mutable_cpu_diff())},
                      {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward_data.scratchpad_desc(), p.backward_scratch)}});
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
