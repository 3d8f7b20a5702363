#include "layers/normalization/onednn_lrn.hpp"

#ifdef CREMA_USE_ONEDNN

#include <string>

#include "layers/normalization/lrn_channels_last.hpp"
#include "layers/onednn_util.hpp"

namespace crema {

using dnnl::memory;
using onednn::CpuEngine;
using onednn::PlainDesc;

namespace {

// oneDNN's LRN for `param` over a bottom of `shape` (4-d). Caffe's WITHIN_CHANNEL adds 1 where ACROSS_CHANNELS
// adds k; both divide alpha by the window's size, as oneDNN does.
dnnl::lrn_forward::primitive_desc ForwardFor(const LRNParameter& param, const std::vector<int>& shape,
                                             memory::format_tag layout = memory::format_tag::nchw,
                                             dnnl::prop_kind kind = dnnl::prop_kind::forward_training,
                                             memory::data_type type = memory::data_type::f32) {
  const bool across = param.norm_region() == LRNParameter::ACROSS_CHANNELS;
  return dnnl::lrn_forward::primitive_desc(
      dnnl::lrn_forward::desc(kind, across ? dnnl::algorithm::lrn_across_channels : dnnl::algorithm::lrn_within_channel,
                              onednn::WithDataType(PlainDesc(shape, layout), type),
                              static_cast<memory::dim>(param.local_size()), param.alpha(), param.beta(),
                              across ? param.k() : 1.f),
      onednn::UserScratchpad(), CpuEngine());
}

// Whether oneDNN 2.6's jit kernel for the gradient across channels (`backward`, made for `shape` in `layout`, of
// `type`) errs: over blobs without channel blocks (channels-last, or plain with one position), with more than 16
// channels and not a multiple of 16, its results were off by a third to a half in bf16 for every local_size and in
// float32 from a local_size of 7 on (AVX-512; found by comparing the layer with a float64 reference over random
// settings). Channel-blocked layouts do not.
bool GradientKernelErrs(const dnnl::lrn_backward::primitive_desc& backward, const std::vector<int>& shape,
                        memory::format_tag layout, memory::data_type type, int local_size) {
  const bool unblocked =
      layout == memory::format_tag::nhwc || (layout == memory::format_tag::nchw && shape[2] * shape[3] == 1);
  const int channels = shape[1];
  return unblocked && channels > 16 && channels % 16 != 0 && (type == memory::data_type::bf16 || local_size >= 7) &&
         std::string(backward.impl_info_str()).find("jit") != std::string::npos;
}

}  // namespace

OneDnnLRNLayer::OneDnnLRNLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : LRNLayer(param, std::move(context)) {}

OneDnnLRNLayer::~OneDnnLRNLayer() = default;

std::string OneDnnLRNLayer::Refusal(const EngineQuery& query) {
  if (query.bottom_shapes.empty()) return "";  // the layer's arity check names it
  const std::vector<int>& shape = query.bottom_shapes.at(0);
  const LRNParameter& param = query.param.lrn_param();
  if (shape.size() != 4 || param.local_size() % 2 != 1) return "";  // the native engine names what is wrong
  // oneDNN 2.6's kernels across channels crash while they are made for a window of one channel (every layout, found by
  // comparing the layer with a float64 reference over random settings).
  if (param.local_size() == 1 && param.norm_region() == LRNParameter::ACROSS_CHANNELS)
    return "oneDNN's LRN kernels across channels fail for a local_size of 1";
  try {
    ForwardFor(param, shape);
  } catch (const dnnl::error& error) {
    return std::string("oneDNN has no LRN primitive for it: ") + error.what();
  }
  return "";
}

void OneDnnLRNLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadParameters();
  saved_ = AddInternalBlob("workspace", InternalLifetime::kUntilBackward);
}

void OneDnnLRNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadShape(*bottom[0]);
  top[0]->ReshapeLike(*bottom[0]);
  // Across channels, forward only, channels-last in and out: crema's own loops (layers/normalization/
  // lrn_channels_last.hpp), faster there than oneDNN's kernel for the layout.
  own_channels_last_ = across_ && !backward_planned() && bottom[0]->layout() == Layout::kChannelsLast &&
                       top[0]->layout() == Layout::kChannelsLast;
  const Quantization& q = top[0]->quantization();
  CREMA_CHECK(q.floats() || own_channels_last_ || q.type == ElementType::kBfloat16)
      << describe() << ": its top was planned in " << ElementTypeName(q.type)
      << ", which it writes only forward alone in channels-last";
  bf16_ = false;
  if (own_channels_last_) {
    passes_.reset();
    RequestWorkspace(0);
    saved_->Reshape({0});
    return;
  }
  const memory::desc user_src = onednn::BlobDesc(*bottom[0]), user_dst = onednn::BlobDesc(*top[0]);
  dnnl::lrn_forward::primitive_desc training, forward;
  dnnl::lrn_backward::primitive_desc backward;
  // The primitives for one layout and data type; false where oneDNN has none, or only its reference ones.
  const auto make = [&](memory::format_tag layout, memory::data_type type) {
    try {
      training = ForwardFor(param_.lrn_param(), bottom[0]->shape(), layout, dnnl::prop_kind::forward_training, type);
      // Where no backward will run, the inference primitive: it keeps no workspace (twice the top's size).
      forward = backward_planned() ? training
                                   : ForwardFor(param_.lrn_param(), bottom[0]->shape(), layout,
                                                dnnl::prop_kind::forward_inference, type);
      backward = dnnl::lrn_backward::primitive_desc(
          dnnl::lrn_backward::desc(across_ ? dnnl::algorithm::lrn_across_channels : dnnl::algorithm::lrn_within_channel,
                                   training.src_desc(), training.src_desc(), size_, alpha_, beta_, across_ ? k_ : 1.f),
          onednn::UserScratchpad(), CpuEngine(), training);
    } catch (const dnnl::error&) {
      return false;  // no primitive in this layout
    }
    if (across_ && backward_planned() && GradientKernelErrs(backward, bottom[0]->shape(), layout, type, size_))
      return false;
    return !onednn::IsReference(forward) && !onednn::IsReference(backward);
  };
  // The bf16 rule in the layout the bottom comes in, where a run of oneDNN's layouts brings it.
  bf16_ = bottom[0]->layout() != Layout::kPlain && requested_precision() == Precision::kBfloat16 &&
          onednn::HasBfloat16Kernels() && make(onednn::TagOf(bottom[0]->layout()), memory::data_type::bf16);
  // oneDNN's jit kernels take channel-blocked layouts (16 channels a block with AVX-512, 8 with AVX2); on
  // NCHW its backward is the reference implementation, 10-50x slower than the native engine (a CaffeNet norm
  // layer: 44-116 ms against 6-19). The first layout whose forward and backward are both not reference
  // implementations is taken, with reorders from and to crema's NCHW around each pass (docs/performance.md).
  // A bottom that comes in a run's layout is tried in that layout first: no reorder then.
  std::vector<memory::format_tag> layouts = {memory::format_tag::nChw16c, memory::format_tag::nChw8c,
                                             memory::format_tag::nhwc, memory::format_tag::nchw};
  if (bottom[0]->layout() != Layout::kPlain) layouts.insert(layouts.begin(), onednn::TagOf(bottom[0]->layout()));
  for (memory::format_tag layout : layouts) {
    if (bf16_ || make(layout, memory::data_type::f32)) break;
  }
  passes_ = std::make_unique<onednn::Passes>(user_src, user_dst, forward, backward, true,
                                             onednn::DataTypeOf(bottom[0]->diff_type()),
                                             onednn::DataTypeOf(top[0]->diff_type()));
  RequestWorkspace(passes_->workspace_floats());
  saved_->Reshape({static_cast<int>(passes_->saved_floats())});
}

void OneDnnLRNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (own_channels_last_) {
    LRNAcrossChannelsLast(bottom[0]->cpu_data(), top[0]->mutable_cpu_bytes(), top[0]->quantization(),
                          static_cast<long long>(bottom[0]->count()) / channels_, channels_, size_, k_, alpha_ / size_,
                          beta_);
    return;
  }
  // floats, or bf16 where planned so (the bf16 rule's input; the output reordered from a float32 primitive's floats)
  passes_->Forward(workspace(), bottom[0]->cpu_bytes(), top[0]->mutable_cpu_bytes(), saved_->mutable_cpu_data());
}

void OneDnnLRNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  // floats, or bf16 where planned so (the bf16 rule's operands and its input gradient)
  passes_->Backward(workspace(), bottom[0]->cpu_bytes(), top[0]->cpu_diff_bytes(), bottom[0]->mutable_cpu_diff_bytes(),
                    saved_->mutable_cpu_data());
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
