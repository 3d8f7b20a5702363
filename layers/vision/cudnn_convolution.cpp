// Convolution and Deconvolution on cuDNN (see cudnn_convolution.hpp).
#include "layers/vision/cudnn_convolution.hpp"

#ifdef CREMA_USE_CUDNN

#include <sstream>

#include "core/math_functions.hpp"

namespace crema {

using cudnn::Direction;

CudnnConvolutionLayer::CudnnConvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context,
                                             bool transposed)
    : GpuOnly<BaseConvolutionLayer>(param, std::move(context)), transposed_(transposed) {}

std::string CudnnConvolutionLayer::Refusal(const EngineQuery& query) {
  const ConvolutionParameter& conv = query.param.convolution_param();
  if (query.bottom_shapes.empty()) return "";  // the layer's arity check names it
  const std::vector<int>& shape = query.bottom_shapes[0];
  const int axes = static_cast<int>(shape.size());
  const int axis = conv.axis() < 0 ? conv.axis() + axes : conv.axis();
  if (axis < 0 || axis >= axes) return "";  // the layer's own checks name the bad axis
  std::ostringstream why;
  // cuDNN's tensors are (N, C, spatial...): one batch axis before the channels.
  if (axis != 1) {
    why << "cuDNN takes the channels on axis 1 (N x C x spatial bottoms); this layer's channel axis is " << axis
        << " of the shape " << ShapeString(shape);
    return why.str();
  }
  // Its convolutions are 2-d and 3-d (1-d would need a dummy axis; Caffe's N-d above 3 has no cuDNN counterpart).
  const int spatial = axes - 2;
  if (spatial != 2 && spatial != 3) {
    why << "cuDNN's engine takes 2-d and 3-d " << (query.param.type() == "Deconvolution" ? "de" : "")
        << "convolutions (4-d or 5-d bottoms); this bottom has the shape " << ShapeString(shape);
    return why.str();
  }
  // A kernel reaching past the padded input (one output in Caffe's rule, the native engine's) is not cuDNN's.
  if (query.param.type() != "Deconvolution") {
    KernelGeometry g;
    try {
      g = ConvolutionGeometry(conv, spatial, query.param.name());
    } catch (const Error&) {
      return "";  // the layer's own checks name what is wrong
    }
    for (int i = 0; i < spatial; ++i) {
      if (shape[2 + i] + 2 * g.pad[i] < g.extent(i)) {
        why << "kernel extent " << g.extent(i) << " reaches past the padded input (" << shape[2 + i] << " + 2 * pad "
            << g.pad[i] << ") along spatial axis " << i << ", which cuDNN does not take";
        return why.str();
      }
    }
  }
  return "";
}

void CudnnConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  CREMA_CHECK(channel_axis_ == 1 && (num_spatial_axes_ == 2 || num_spatial_axes_ == 3))
      << describe() << ": the cudnn engine takes 2-d and 3-d convolutions over channel axis 1 (its refusal should "
      << "have said so); input shape " << bottom[0]->shape_string();
  empty_ = bottom[0]->count() == 0 || top[0]->count() == 0;
  if (empty_) {
    RequestWorkspace(0);
    return;
  }
  // The convolution runs from its input to its output: the bottom to the top, or for Deconvolution the top to
  // the bottom. The weights are its filter as they lie: (outputs, inputs / group, kernel...) of that convolution.
  const std::vector<int>& bottom_shape = bottom[0]->shape();
  const std::vector<int>& top_shape = top[0]->shape();
  cudnn::ConvolutionKey key;
  key.device = context().gpu_id();
  key.input = transposed_ ? top_shape : bottom_shape;
  key.filter = params_[0]->shape();
  key.pad = geometry_.pad;
  key.stride = geometry_.stride;
  key.dilation = geometry_.dilation;
  key.groups = group_;
  half_ = device() == Device::kGPU ? GpuCodePrecision() : Precision::kFloat32;
  key.data_type = cudnn::DataTypeOf(half_);
  plan_.Describe(key, transposed_ ? bottom_shape : top_shape, describe());
  bias_.SetPacked({1, num_output_, 1, 1});
  relu_.Set(cudnn::ActivationMode::kReLU);
  biased_top_.SetPacked({num_, num_output_, top_spatial_size_, 1});
  // Describing needs no device, so the layer sets up anywhere (its shapes can be checked against cuDNN's on a
  // machine without a GPU); choosing algorithms needs the GPU's handle, and running needs the GPU.
  if (device() != Device::kGPU) {
    RequestWorkspace(0);
    return;
  }
  plan_.ChooseAlgorithms(context(), describe());
  size_t bytes = plan_.largest_workspace_bytes();
  half_offsets_.clear();
  if (half_ != Precision::kFloat32) {
    const auto aligned = [](size_t n) { return (n + 255) / 256 * 256; };
    for (const size_t values : {static_cast<size_t>(bottom[0]->count()), static_cast<size_t>(top[0]->count()),
                                static_cast<size_t>(params_[0]->count())}) {
      bytes = aligned(bytes);
      half_offsets_.push_back(bytes);
      bytes += values * sizeof(uint16_t);
    }
  }
  RequestWorkspace((bytes + sizeof(float) - 1) / sizeof(float));
}

uint16_t* CudnnConvolutionLayer::HalfRegion(int which) {
  return reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(workspace()) + half_offsets_[which]);
}

void* CudnnConvolutionLayer::WorkspaceFor(Direction direction) {
  return plan_.workspace_bytes(direction) > 0 ? workspace() : nullptr;
}

bool CudnnConvolutionLayer::FusesBiasAndReLU(const FusedActivation& activation) const {
  return !transposed_ && half_ == Precision::kFloat32 && bias_term_ && num_spatial_axes_ == 2 &&
         activation.kind == FusedActivation::kReLU && activation.alpha == 0.f;
}

void CudnnConvolutionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (empty_) return;
  if (half_ != Precision::kFloat32) {
    HalfForward(bottom, top);
    return;
  }
  const float* weights = params_[0]->gpu_data();
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->gpu_data();
    float* output = top[b]->mutable_gpu_data();
    // A fused sum adds to what the output holds: the summand, there already where the memory plan put the output in
    // its memory.
    const bool sum = summand_ != nullptr && ComputesFusedSum();
    if (sum && summand_->gpu_data() != output) copy(context(), top[b]->count(), summand_->gpu_data(), output);
    if (FusesBiasAndReLU(fused_activation_)) {
      plan_.ForwardBiasReLU(context(), input, weights, sum, bias_, params_[1]->gpu_data(), relu_, output,
                            WorkspaceFor(Direction::kForward));
      continue;
    }
    if (transposed_)
      plan_.BackwardData(context(), input, weights, output, WorkspaceFor(Direction::kBackwardData), 0.f);
    else
      plan_.Forward(context(), input, weights, output, WorkspaceFor(Direction::kForward), sum ? 1.f : 0.f);
    if (bias_term_) cudnn::AddBias(context(), bias_, params_[1]->gpu_data(), biased_top_, output);
  }
}

void CudnnConvolutionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                         const std::vector<Blob*>& bottom) {
  if (empty_) return;
  if (half_ != Precision::kFloat32) {
    HalfBackward(top, propagate_down, bottom);
    return;
  }
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const float* weights = params_[0]->gpu_data();
  for (size_t b = 0; b < top.size(); ++b) {
    const float* top_diff = top[b]->gpu_diff();
    // Parameter gradients accumulate (beta 1: over bottoms and calls); the bottom gradient is overwritten (beta 0).
    if (bias_grad) cudnn::BiasGradient(context(), biased_top_, top_diff, bias_, params_[1]->mutable_gpu_diff());
    if (weight_grad) {
      // The filter gradient pairs the convolution's input with its output's gradient: the bottom's data with the
      // top's gradient, or for Deconvolution the top's gradient with the bottom's data.
      float* weight_diff = params_[0]->mutable_gpu_diff();
      const float* bottom_data = bottom[b]->gpu_data();
      if (transposed_)
        plan_.BackwardFilter(context(), top_diff, bottom_data, weight_diff, WorkspaceFor(Direction::kBackwardFilter),
                             1.f);
      else
        plan_.BackwardFilter(context(), bottom_data, top_diff, weight_diff, WorkspaceFor(Direction::kBackwardFilter),
                             1.f);
    }
    if (propagate_down[b]) {
      float* bottom_diff = bottom[b]->mutable_gpu_diff();
      if (transposed_)
        plan_.Forward(context(), top_diff, weights, bottom_diff, WorkspaceFor(Direction::kForward), 0.f);
      else
        plan_.BackwardData(context(), top_diff, weights, bottom_diff, WorkspaceFor(Direction::kBackwardData), 0.f);
    }
  }
}

// The three 16-bit regions: the bottom's values (0), the top's (1) and the weights' gradient (2). A bottom the plan
// keeps in 16 bits is read as it lies, and a top kept so is written by cuDNN itself, its bias and a fused ReLU then
// applied in place (HalfTop).
void CudnnConvolutionLayer::HalfForward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const uint16_t* w = HalfWeights();
  const HalfTopFinish finish =
      HalfTopFinishOf(bias_term_ ? params_[1]->gpu_data() : nullptr, top_spatial_size_, num_output_);
  for (size_t b = 0; b < bottom.size(); ++b) {
    const uint16_t* input = HalfValuesOf(context(), half_, *bottom[b], 0, bottom[b]->count(), HalfRegion(0));
    const bool half_out = IsHalfType(top[b]->data_type());
    uint16_t* output = half_out ? static_cast<uint16_t*>(top[b]->mutable_bytes_on(Device::kGPU)) : HalfRegion(1);
    if (transposed_)
      plan_.BackwardData(context(), input, w, output, WorkspaceFor(Direction::kBackwardData), 0.f);
    else
      plan_.Forward(context(), input, w, output, WorkspaceFor(Direction::kForward), 0.f);
    if (half_out) {
      if (finish.bias != nullptr || finish.relu) HalfTop(context(), half_, top[b]->count(), output, finish, output);
      continue;
    }
    // A fused sum: the summand, copied into the output where it does not lie there, plus the widened result.
    float* top_data = top[b]->mutable_gpu_data();
    const bool sum = summand_ != nullptr && ComputesFusedSum();
    if (sum && summand_->gpu_data() != top_data) copy(context(), top[b]->count(), summand_->gpu_data(), top_data);
    WidenFromHalf(context(), half_, top[b]->count(), output, sum ? 1.f : 0.f, top_data);
    if (bias_term_) cudnn::AddBias(context(), bias_, params_[1]->gpu_data(), biased_top_, top_data);
  }
  if (half_tops_) FinishFloatTops(top);
}

void CudnnConvolutionLayer::HalfBackward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                         const std::vector<Blob*>& bottom) {
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const Blob& weights = *params_[0];
  const uint16_t* w = HalfWeights();
  uint16_t* bottom_half = HalfRegion(0);
  uint16_t* top_half = HalfRegion(1);
  uint16_t* weight_diff_half = HalfRegion(2);
  for (size_t b = 0; b < top.size(); ++b) {
    const float* top_diff = top[b]->gpu_diff();
    if (bias_grad) cudnn::BiasGradient(context(), biased_top_, top_diff, bias_, params_[1]->mutable_gpu_diff());
    RoundToHalf(context(), half_, top[b]->count(), top_diff, top_half);
    if (weight_grad) {
      // The 16-bit gradient of this bottom alone (beta 0), added to the float32 one (parameter gradients accumulate).
      const uint16_t* input = HalfValuesOf(context(), half_, *bottom[b], 0, bottom[b]->count(), HalfRegion(0));
      if (transposed_)
        plan_.BackwardFilter(context(), top_half, input, weight_diff_half, WorkspaceFor(Direction::kBackwardFilter),
                             0.f);
      else
        plan_.BackwardFilter(context(), input, top_half, weight_diff_half, WorkspaceFor(Direction::kBackwardFilter),
                             0.f);
      WidenFromHalf(context(), half_, weights.count(), weight_diff_half, 1.f, params_[0]->mutable_gpu_diff());
    }
    if (propagate_down[b]) {
      // The bottom's region is free again: the 16-bit input gradient, then widened into the bottom's (overwritten).
      if (transposed_)
        plan_.Forward(context(), top_half, w, bottom_half, WorkspaceFor(Direction::kForward), 0.f);
      else
        plan_.BackwardData(context(), top_half, w, bottom_half, WorkspaceFor(Direction::kBackwardData), 0.f);
      WidenFromHalf(context(), half_, bottom[b]->count(), bottom_half, 0.f, bottom[b]->mutable_gpu_diff());
    }
  }
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
