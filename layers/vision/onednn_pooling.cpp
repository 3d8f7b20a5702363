#include "layers/vision/onednn_pooling.hpp"

#ifdef CREMA_USE_ONEDNN

#include <cstdlib>
#include <sstream>
#include <string>

#include "layers/onednn_util.hpp"
#include "layers/vision/kernel_geometry.hpp"
#include "layers/vision/pooling_lanes.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::CpuEngine;
using onednn::Dims;
using onednn::PlainDesc;

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

// oneDNN's pooling of `src` for `plan`, its output in oneDNN's choice of layout, or in `dst` where given.
dnnl::pooling_forward::primitive_desc ForwardFor(const Plan& plan, const memory::desc& src,
                                                 dnnl::prop_kind kind = dnnl::prop_kind::forward_training,
                                                 const memory::desc* given_dst = nullptr) {
  const memory::desc dst =
      given_dst != nullptr
          ? *given_dst
          : memory::desc(
                Dims({static_cast<int>(src.dims()[0]), static_cast<int>(src.dims()[1]), plan.out_h, plan.out_w}),
                src.data_type(), Tag::any);
  return dnnl::pooling_forward::primitive_desc(dnnl::pooling_forward::desc(kind, plan.algorithm, src, dst, plan.strides,
                                                                           plan.kernel, plan.pad_left, plan.pad_right),
                                               onednn::UserScratchpad(), CpuEngine());
}

}  // namespace

OneDnnPoolingLayer::OneDnnPoolingLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : PoolingLayer(param, std::move(context)) {}

OneDnnPoolingLayer::~OneDnnPoolingLayer() = default;

std::string OneDnnPoolingLayer::Refusal(const EngineQuery& query) {
  if (query.bottom_shapes.empty()) return "";  // the layer's arity check names it
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

bool OneDnnPoolingLayer::PassesQuantizationThrough() const {
  // In training, bf16 in crema's loops (8 bits are planned forward only).
  return method_ == PoolingParameter::MAX && (!backward_planned() || lanes_possible_);
}

void OneDnnPoolingLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadWindow();
  if (method_ == PoolingParameter::MAX && maxima_ == nullptr)
    maxima_ = AddInternalBlob("maxima", InternalLifetime::kUntilBackward);
}

void OneDnnPoolingLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  PoolingLayer::Reshape(bottom, top);  // checks the bottom and shapes the top, as the native engine does
  Plan plan;
  const std::string why = PlanFor(param_, bottom[0]->shape(), static_cast<int>(top.size()), &plan);
  CREMA_CHECK(why.empty() && !plan.kernel.empty())
      << describe() << ": the onednn engine cannot pool a bottom of shape " << bottom[0]->shape_string() << ": " << why;
  CREMA_CHECK(plan.out_h == pooled_h_ && plan.out_w == pooled_w_) << describe() << ": output size mismatch";
  // MAX over channels side by side (a run's blocks, or channels-last), the top in the same layout: crema's own
  // loops (layers/vision/pooling_lanes.hpp), their record of the maxima a byte an output.
  lanes_possible_ = method_ == PoolingParameter::MAX && bottom[0]->layout() != Layout::kPlain &&
                    top[0]->layout() == bottom[0]->layout() && kernel_h_ * kernel_w_ <= kMostWindowValues &&
                    std::getenv("CREMA_ONEDNN_POOLING") == nullptr;
  const bool floats = bottom[0]->quantization().floats();
  CREMA_CHECK(bottom[0]->quantization() == top[0]->quantization() && (floats || PassesQuantizationThrough()))
      << describe() << ": its bottom and top were planned in different element types";
  // bf16 in training (forward only, oneDNN's inference primitive pools it).
  const bool bf16_lanes = bottom[0]->data_type() == ElementType::kBfloat16 && backward_planned();
  in_lanes_ = lanes_possible_ && (floats || bf16_lanes);
  bf16_gradients_ = in_lanes_ && backward_planned() && requested_precision() == Precision::kBfloat16 &&
                    onednn::HasBfloat16Kernels() &&
                    (bottom[0]->layout() == Layout::kChannelBlocks16 || bottom[0]->layout() == Layout::kChannelsLast);
  CREMA_CHECK(bf16_gradients_ ||
              (bottom[0]->diff_type() == ElementType::kFloat32 && top[0]->diff_type() == ElementType::kFloat32))
      << describe() << ": its gradients were planned in bf16, but it computes them in floats here";
  if (in_lanes_) {
    passes_.reset();
    RequestWorkspace(0);
    // A byte an output, where a backward will read them; none for a net planned for forward alone.
    const size_t bytes = backward_planned() ? static_cast<size_t>(top[0]->count()) : 0;
    maxima_->Reshape({static_cast<int>((bytes + sizeof(float) - 1) / sizeof(float))});
    return;
  }
  // The primitive works in the bottom's layout (plain, or a run's); the top gets the layout the net gave it.
  const memory::desc user_src = onednn::BlobDesc(*bottom[0]), user_dst = onednn::BlobDesc(*top[0]);
  // Where no backward will run, the inference primitive: it keeps no workspace of maxima.
  // In 8 bits or bf16, the inference primitive between the blobs; the training one (which hints the backward, never
  // run then) in floats.
  const auto training =
      ForwardFor(plan, floats ? user_src : onednn::LayoutDesc(bottom[0]->shape(), bottom[0]->layout()));
  // 8-bit and bf16 values are pooled straight into the top, in its layout (no reorder, no rounding).
  const auto forward =
      backward_planned() ? training
                         : ForwardFor(plan, user_src, dnnl::prop_kind::forward_inference, floats ? nullptr : &user_dst);
  // The gradient in the forward's input layout first, then in oneDNN's choice: its choice for a global
  // pooling's gradient (a 1 x 1 top) may be a layout it has only the reference kernel for (a ResNet's average
  // pool over 16-channel blocks: 6 ms against 0.1).
  dnnl::pooling_backward::primitive_desc backward;
  for (const memory::desc& src :
       {training.src_desc(), memory::desc(user_src.dims(), memory::data_type::f32, Tag::any)}) {
    backward = dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(plan.algorithm, src, training.dst_desc(), plan.strides, plan.kernel, plan.pad_left,
                                     plan.pad_right),
        onednn::UserScratchpad(), CpuEngine(), training);
    if (!onednn::IsReference(backward)) break;
  }
  passes_ = std::make_unique<onednn::Passes>(user_src, user_dst, forward, backward, false);
  RequestWorkspace(passes_->workspace_floats());
  if (maxima_ != nullptr) maxima_->Reshape({static_cast<int>(passes_->saved_floats())});
}

void OneDnnPoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (in_lanes_) {
    uint8_t* record = maxima_->count() > 0 ? reinterpret_cast<uint8_t*>(maxima_->mutable_cpu_data()) : nullptr;
    if (bottom[0]->data_type() == ElementType::kBfloat16) {
      MaxPoolForwardInLanes(windows(), bottom[0]->layout(), bottom[0]->shape(0), bottom[0]->shape(1),
                            static_cast<const uint16_t*>(bottom[0]->cpu_bytes()),
                            static_cast<uint16_t*>(top[0]->mutable_cpu_bytes()), record);
      return;
    }
    MaxPoolForwardInLanes(windows(), bottom[0]->layout(), bottom[0]->shape(0), bottom[0]->shape(1),
                          bottom[0]->cpu_data(), top[0]->mutable_cpu_data(), record);
    return;
  }
  passes_->Forward(workspace(), bottom[0]->cpu_bytes(), top[0]->mutable_cpu_bytes(),
                   maxima_ != nullptr ? maxima_->mutable_cpu_data() : nullptr);
}

void OneDnnPoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  if (in_lanes_ && bf16_gradients_) {
    MaxPoolBackwardInLanesBfloat16(
        windows(), bottom[0]->layout(), bottom[0]->shape(0), bottom[0]->shape(1), top[0]->cpu_diff_bytes(),
        top[0]->diff_type() == ElementType::kBfloat16, reinterpret_cast<const uint8_t*>(maxima_->cpu_data()),
        bottom[0]->mutable_cpu_diff_bytes(), bottom[0]->diff_type() == ElementType::kBfloat16);
    return;
  }
  if (in_lanes_) {
    MaxPoolBackwardInLanes(windows(), bottom[0]->layout(), bottom[0]->shape(0), bottom[0]->shape(1), top[0]->cpu_diff(),
                           reinterpret_cast<const uint8_t*>(maxima_->cpu_data()), bottom[0]->mutable_cpu_diff());
    return;
  }
  passes_->Backward(workspace(), nullptr, top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
                    maxima_ != nullptr ? maxima_->mutable_cpu_data() : nullptr);
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
