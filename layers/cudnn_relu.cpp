// ReLU on cuDNN (see cudnn_relu.hpp).
#include "layers/cudnn_relu.hpp"

#ifdef CREMA_USE_CUDNN

#include <sstream>

namespace crema {

std::string CudnnReLULayer::Refusal(const EngineQuery& query) {
  const float slope = query.param.relu_param().negative_slope();
  if (slope == 0.f) return "";
  std::ostringstream why;
  why << "cuDNN's activations have no leaky ReLU (negative_slope " << slope << ")";
  return why.str();
}

void CudnnReLULayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReLULayer::Reshape(bottom, top);
  CREMA_CHECK(param_.relu_param().negative_slope() == 0.f)
      << describe() << ": the cudnn engine computes ReLU without a negative_slope (its refusal should have said so)";
  const Blob& input = *bottom[0];
  empty_ = input.count() == 0;
  if (empty_) return;
  // Each value on its own: any 4-d packed tensor of the count will do; the first axis and the rest keep the
  // dimensions moderate.
  const int first = input.num_axes() > 0 ? input.shape(0) : 1;
  desc_.SetPacked({first, input.count() / first, 1, 1});
  relu_.SetReLU();
}

void CudnnReLULayer::ForwardElements(const Blob& bottom, Blob* top) {
  CREMA_CHECK(device() == Device::kGPU) << describe() << ": the cudnn engine runs on the GPU only (the registry "
                                        << "picks another engine on the CPU)";
  if (empty_) return;
  cudnn::ActivationForward(context(), relu_, desc_, bottom.gpu_data(), top->mutable_gpu_data());
}

void CudnnReLULayer::BackwardElements(const Blob& top, Blob* bottom) {
  CREMA_CHECK(device() == Device::kGPU) << describe() << ": the cudnn engine runs on the GPU only (the registry "
                                        << "picks another engine on the CPU)";
  if (empty_) return;
  // In place the input is gone; the output stands in for it, which for ReLU gives the same gradient (y > 0
  // exactly where x > 0, and y = x there). dy and dx are then one buffer, which cuDNN allows.
  const float* x = bottom == &top ? top.gpu_data() : bottom->gpu_data();
  cudnn::ActivationBackward(context(), relu_, desc_, top.gpu_data(), top.gpu_diff(), x, bottom->mutable_gpu_diff());
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
