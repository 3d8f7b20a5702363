// Softmax on cuDNN (see cudnn_softmax.hpp).
#include "layers/common/cudnn_softmax.hpp"

#ifdef CREMA_USE_CUDNN

namespace crema {

std::string CudnnSoftmaxLayer::Refusal(const EngineQuery& query) {
  // Every axis and shape the native engine takes is an (outer, classes, inner, 1) tensor; a bad axis is the layer's
  // own error.
  const LayerParameter& param = query.param;
  if (param.bottom_size() > 0 && param.top_size() > 0 && param.top(0) == param.bottom(0))
    return "runs only out of place (top '" + param.top(0) + "' is its bottom)";
  return "";
}

void CudnnSoftmaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ClassAxis split = SplitAtClassAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  top[0]->ReshapeLike(*bottom[0]);
  empty_ = bottom[0]->count() == 0;
  if (!empty_) desc_.SetPacked({split.outer, split.classes, split.inner, 1});
}

void CudnnSoftmaxLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (empty_) return;
  cudnn::SoftmaxForward(context(), desc_, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void CudnnSoftmaxLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  if (!propagate_down[0] || empty_) return;
  cudnn::SoftmaxBackward(context(), desc_, top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
