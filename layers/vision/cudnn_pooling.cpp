// Pooling on cuDNN (see cudnn_pooling.hpp).
#include "layers/vision/cudnn_pooling.hpp"

#ifdef CREMA_USE_CUDNN

#include <sstream>

#include "layers/vision/kernel_geometry.hpp"

namespace crema {

namespace {

// cuDNN's output size along one axis: the windows that fit wholly in the padded input (rounding down).
int CudnnPooledSize(int in, int kernel, int pad, int stride) { return (in + 2 * pad - kernel) / stride + 1; }

const char* AxisName(int axis) { return axis == 0 ? "height" : "width"; }

}  // namespace

std::string CudnnPoolingLayer::Refusal(const EngineQuery& query) {
  const PoolingParameter& param = query.param.pooling_param();
  if (param.pool() == PoolingParameter::STOCHASTIC)
    return "STOCHASTIC pooling is not cuDNN's (its samples come from the layer's own random stream)";
  if (query.param.top_size() > 1) return "cuDNN keeps no argmax, so it cannot give MAX pooling's second (mask) top";
  if (query.bottom_shapes.empty() || query.bottom_shapes[0].size() != 4) return "";  // the layer's checks name it
  KernelGeometry window;
  try {
    window = PoolingGeometry(param, query.param.name());
  } catch (const Error&) {
    return "";  // the layer's own checks name what is wrong
  }
  const std::vector<int>& shape = query.bottom_shapes[0];
  const bool ceil = param.round_mode() == PoolingParameter::CEIL;
  std::ostringstream why;
  for (int axis = 0; axis < 2; ++axis) {
    const int in = shape[2 + axis];
    const int kernel = param.global_pooling() ? in : window.kernel[axis];
    const int pad = window.pad[axis], stride = window.stride[axis];
    if (pad >= kernel && !param.global_pooling()) return "";  // the layer refuses it (pad < kernel)
    const int caffe = PoolingLayer::PooledSize(in, kernel, pad, stride, ceil);
    if (caffe < 1) return "";  // an empty output: the layer's own error
    if (in + 2 * pad < kernel) {
      why << "the window (" << kernel << ") is larger than the padded input's " << AxisName(axis) << " (" << in
          << " + 2 * pad " << pad << "): Caffe still pools one clipped window, cuDNN none";
      return why.str();
    }
    const int cudnn = CudnnPooledSize(in, kernel, pad, stride);
    if (cudnn != caffe) {
      why << "Caffe's output " << AxisName(axis) << " is " << caffe << " (round_mode: CEIL, a last window that "
          << "overhangs the input) where cuDNN's, which rounds down, is " << cudnn
          << "; round_mode: FLOOR gives cuDNN's size";
      return why.str();
    }
  }
  return "";
}

void CudnnPoolingLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadWindow();  // cuDNN's backward finds each window's maximum again; the argmax is the native rules' (16-bit blobs)
  if (method_ == PoolingParameter::MAX && argmax_ == nullptr)
    argmax_ = AddInternalBlob("argmax", InternalLifetime::kUntilBackward);
}

void CudnnPoolingLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  PoolingLayer::Reshape(bottom, top);
  const Blob& input = *bottom[0];
  // Over 16-bit blobs the native rules run (see the header), keeping their argmax; over floats cuDNN, keeping none,
  // but for an AVE that reads its input in 16 bits (it rounds floats first, which cuDNN's call does not).
  by_rules_ = IsHalfType(input.data_type()) || ReadsHalfInGpuCode();
  if (argmax_ != nullptr && !by_rules_) argmax_->Reshape({0});
  // The refusal saw the first shape; a later reshape (another image size) may bring one where the rules differ.
  const int in[2] = {height_, width_}, kernel[2] = {kernel_h_, kernel_w_}, pad[2] = {pad_h_, pad_w_},
            stride[2] = {stride_h_, stride_w_}, pooled[2] = {pooled_h_, pooled_w_};
  for (int axis = 0; axis < 2; ++axis) {
    CREMA_CHECK(in[axis] + 2 * pad[axis] >= kernel[axis] &&
                CudnnPooledSize(in[axis], kernel[axis], pad[axis], stride[axis]) == pooled[axis])
        << describe() << ": for the input shape " << input.shape_string() << " Caffe's output " << AxisName(axis)
        << " (" << pooled[axis] << ") is not cuDNN's, so the cudnn engine cannot pool it; give the layer "
        << "round_mode: FLOOR, or run it with the native engine (--engine=Pooling:native)";
  }
  empty_ = input.count() == 0;
  if (empty_) return;
  bottom_desc_.SetPacked(input.shape());
  top_desc_.SetPacked(top[0]->shape());
  const cudnn::PoolingMode mode =
      method_ == PoolingParameter::AVE ? cudnn::PoolingMode::kAverageIncludingPadding : cudnn::PoolingMode::kMax;
  pooling_.Set2d(mode, context().deterministic(), kernel_h_, kernel_w_, pad_h_, pad_w_, stride_h_, stride_w_);
  // cuDNN's own arithmetic must agree with the check above; a disagreement is a description error, caught here
  // rather than as values written past the top.
  CREMA_CHECK(pooling_.OutputShape(bottom_desc_) == top[0]->shape())
      << describe() << ": cuDNN computes the output shape " << ShapeString(pooling_.OutputShape(bottom_desc_))
      << " for the input " << input.shape_string() << ", where Caffe's is " << top[0]->shape_string();
}

void CudnnPoolingLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (empty_) return;
  if (by_rules_) return ForwardByRules(bottom, top);
  cudnn::PoolingForward(context(), pooling_, bottom_desc_, bottom[0]->gpu_data(), top_desc_,
                        top[0]->mutable_gpu_data());
}

void CudnnPoolingLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  if (!propagate_down[0] || empty_) return;
  if (by_rules_) return BackwardByRules(top, bottom);
  cudnn::PoolingBackward(context(), pooling_, top_desc_, top[0]->gpu_data(), top[0]->gpu_diff(), bottom_desc_,
                         bottom[0]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
