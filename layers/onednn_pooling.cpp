#include "layers/onednn_pooling.hpp"

#ifdef CREMA_USE_ONEDNN

#include <sstream>
#include <unordered_map>

#include "layers/kernel_geometry.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::CpuEngine;
using onednn::Dims;

namespace {

// What oneDNN is asked to compute for Caffe's pooling of an N x C x H x W bottom.
struct Plan {
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
  memory::dims kernel, strides, pad_left, pad_right;
  int out_h = 0, out_w = 0;
};

// Fills `plan` and returns "", or returns why oneDNN cannot reproduce this pooling. Parameters the layer itself
// rejects (bad windows) are left to its own checks: "" with an empty plan.
std::string PlanFor(const LayerParameter& layer, const std::vector<int>& shape, int tops, Plan* plan) {
  const PoolingParameter& param = layer.pooling_param();
  if (param.pool() == PoolingParameter::STOCHASTIC) return "oneDNN has no STOCHASTIC pooling";
  if (tops > 1) return "the argmax top is the native engine's";
  if (shape.size() != 4) return "takes 4-d bottoms only";
  KernelGeometry g;
  try {
    g = PoolingGeometry(param, layer.name());
  } catch (const Error&) {
    return "";
  }
  const int in[2] = {shape[2], shape[3]};
  if (param.global_pooling()) g.kernel = {in[0], in[1]};
  const bool ceil = param.round_mode() == PoolingParameter::CEIL;
  int out[2], right[2];
  bool inside_padding = true, unpadded = true;
  for (int i = 0; i < 2; ++i) {
    out[i] = PoolingLayer::PooledSize(in[i], g.kernel[i], g.pad[i], g.stride[i], ceil);
    if (out[i] < 1 || g.kernel[i] < 1 || g.pad[i] >= g.kernel[i]) return "";
    if ((out[i] - 1) * g.stride[i] - g.pad[i] >= in[i]) return "a window covers no input (stride beyond the kernel)";
    right[i] = onednn::RightPadding(in[i], out[i], g.pad[i], g.kernel[i], g.stride[i]);
    if (right[i] < 0) return "oneDNN's output-size arithmetic cannot give Caffe's size";
    inside_padding = inside_padding && right[i] <= g.pad[i];
    unpadded = unpadded && g.pad[i] == 0;
  }
  if (param.pool() == PoolingParameter::MAX) {
    plan->algorithm = dnnl::algorithm::pooling_max;
  } else if (inside_padding) {
    plan->algorithm = dnnl::algorithm::pooling_avg_include_padding;  // every window: the kernel's area
  } else if (unpadded) {
    plan->algorithm = dnnl::algorithm::pooling_avg_exclude_padding;  // windows past the edge: the pixels inside
  } else {
    return "AVE with a last window beyond the padding divides by an area oneDNN does not use";
  }
  plan->kernel = Dims({g.kernel[0], g.kernel[1]});
  plan->strides = Dims({g.stride[0], g.stride[1]});
  plan->pad_left = Dims({g.pad[0], g.pad[1]});
  plan->pad_right = Dims({right[0], right[1]});
  plan->out_h = out[0];
  plan->out_w = out[1];
  return "";
}

dnnl::pooling_forward::primitive_desc ForwardFor(const Plan& plan, const memory::desc& src) {
  const memory::desc dst(Dims({static_cast<int>(src.dims()[0]), static_cast<int>(src.dims()[1]), plan.out_h,
                               plan.out_w}),
                         memory::data_type::f32, Tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, plan.algorithm, src, dst, plan.strides,
                                  plan.kernel, plan.pad_left, plan.pad_right),
      attr, CpuEngine());
}

memory::desc PlainDesc(const std::vector<int>& shape) {
  return memory::desc(Dims({shape[0], shape[1], shape[2], shape[3]}), memory::data_type::f32, Tag::nchw);
}

}  // namespace

struct OneDnnPoolingLayer::Primitives {
  memory::desc user_src, user_dst;
  dnnl::pooling_forward::primitive_desc forward;
  dnnl::pooling_backward::primitive_desc backward;
  dnnl::pooling_forward forward_primitive;
  dnnl::pooling_backward backward_primitive;
  onednn::Regions regions;
  size_t dst = 0, forward_scratch = 0, diff_dst = 0, diff_src = 0, backward_scratch = 0;
};

OneDnnPoolingLayer::OneDnnPoolingLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : PoolingLayer(param, std::move(context)) {}

OneDnnPoolingLayer::~OneDnnPoolingLayer() = default;

std::string OneDnnPoolingLayer::Refusal(const EngineQuery& query) {
  Plan plan;
  const std::string why = PlanFor(query.param, query.bottom_shapes.at(0), query.param.top_size(), &plan);
  if (!why.empty() || plan.kernel.empty()) return why;
  try {
    ForwardFor(plan, PlainDesc(query.bottom_shapes[0]));
  } catch (const dnnl::error& error) {
    return std::string("oneDNN has no pooling primitive for it: ") + error.what();
  }
  return "";
}

void OneDnnPoolingLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadWindow();
  if (method_ == PoolingParameter::MAX && maxima_ == nullptr) maxima_ = AddInternalBlob("maxima");
}

void OneDnnPoolingLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  PoolingLayer::Reshape(bottom, top);  // checks the bottom and shapes the top, as the native engine does
  Plan plan;
  const std::string why = PlanFor(param_, bottom[0]->shape(), static_cast<int>(top.size()), &plan);
  CREMA_CHECK(why.empty() && !plan.kernel.empty())
      << describe() << ": the onednn engine cannot pool a bottom of shape " << bottom[0]->shape_string() << ": "
      << why;
  CREMA_CHECK(plan.out_h == pooled_h_ && plan.out_w == pooled_w_) << describe() << ": output size mismatch";
  auto p = std::make_unique<Primitives>();
  p->user_src = PlainDesc(bottom[0]->shape());
  p->user_dst = PlainDesc(top[0]->shape());
  p->forward = ForwardFor(plan, p->user_src);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::desc any_src(p->user_src.dims(), memory::data_type::f32, Tag::any);
  p->backward = dnnl::pooling_backward::primitive_desc(
      dnnl::pooling_backward::desc(plan.algorithm, any_src, p->forward.dst_desc(), plan.strides, plan.kernel,
                                   plan.pad_left, plan.pad_right),
      attr, CpuEngine(), p->forward);
  p->forward_primitive = dnnl::pooling_forward(p->forward);
  p->backward_primitive = dnnl::pooling_backward(p->backward);
  p->dst = p->regions.Add(p->forward.dst_desc());
  p->forward_scratch = p->regions.Add(p->forward.scratchpad_desc());
  p->regions.Restart();
  p->diff_dst = p->regions.Add(p->backward.diff_dst_desc());
  p->diff_src = p->regions.Add(p->backward.diff_src_desc());
  p->backward_scratch = p->regions.Add(p->backward.scratchpad_desc());
  RequestWorkspace(p->regions.Floats());
  if (maxima_ != nullptr) {
    const size_t bytes = p->forward.workspace_desc().get_size();
    maxima_->Reshape({static_cast<int>((bytes + sizeof(float) - 1) / sizeof(float))});
  }
  primitives_ = std::move(p);
}

void OneDnnPoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace());
  // The source's layout is crema's, so the primitive reads the bottom directly.
  const memory src = bind.Plain(p.user_src, bottom[0]->cpu_data());
  float* output = top[0]->mutable_cpu_data();
  const memory dst = bind.Result(p.user_dst, output, p.forward.dst_desc(), p.dst);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_DST, dst},
      {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.forward.scratchpad_desc(), p.forward_scratch)}};
  if (maxima_ != nullptr)
    args[DNNL_ARG_WORKSPACE] = memory(p.forward.workspace_desc(), CpuEngine(), maxima_->mutable_cpu_data());
  p.forward_primitive.execute(bind.stream(), args);
  bind.Out(dst, p.user_dst, output);
  bind.stream().wait();
}

void OneDnnPoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  Primitives& p = *primitives_;
  onednn::Binder bind(workspace());
  const memory diff_dst = bind.In(p.user_dst, top[0]->cpu_diff(), p.backward.diff_dst_desc(), p.diff_dst);
  float* input_diff = bottom[0]->mutable_cpu_diff();
  const memory diff_src = bind.Result(p.user_src, input_diff, p.backward.diff_src_desc(), p.diff_src);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_DIFF_DST, diff_dst},
      {DNNL_ARG_DIFF_SRC, diff_src},
      {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward.scratchpad_desc(), p.backward_scratch)}};
  if (maxima_ != nullptr)
    args[DNNL_ARG_WORKSPACE] = memory(p.forward.workspace_desc(), CpuEngine(), maxima_->mutable_cpu_data());
  p.backward_primitive.execute(bind.stream(), args);
  bind.Out(diff_src, p.user_src, input_diff);
  bind.stream().wait();
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
