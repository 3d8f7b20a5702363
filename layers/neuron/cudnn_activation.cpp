// Sigmoid, TanH (and ReLU's engine's base) on cuDNN (see cudnn_activation.hpp).
#include "layers/neuron/cudnn_activation.hpp"

#ifdef CREMA_USE_CUDNN

namespace crema {

template <typename Native, cudnn::ActivationMode kMode>
void CudnnActivationLayer<Native, kMode>::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Native::Reshape(bottom, top);
  const Blob& input = *bottom[0];
  empty_ = input.count() == 0;
  if (empty_) return;
  // Each value on its own: any 4-d packed tensor of the count will do; the first axis and the rest keep the
  // dimensions moderate.
  const int first = input.num_axes() > 0 ? input.shape(0) : 1;
  desc_.SetPacked({first, input.count() / first, 1, 1});
  activation_.Set(kMode);
}

template <typename Native, cudnn::ActivationMode kMode>
void CudnnActivationLayer<Native, kMode>::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = this->device();
  CREMA_CHECK(d == Device::kGPU) << this->describe() << ": the cudnn engine runs on the GPU only (the registry "
                                 << "picks another engine on the CPU)";
  if (empty_) return;
  cudnn::ActivationForward(this->context(), activation_, desc_, bottom.data_on(d), top->mutable_data_on(d));
}

template <typename Native, cudnn::ActivationMode kMode>
void CudnnActivationLayer<Native, kMode>::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = this->device();
  CREMA_CHECK(d == Device::kGPU) << this->describe() << ": the cudnn engine runs on the GPU only (the registry "
                                 << "picks another engine on the CPU)";
  if (empty_) return;
  // In place, x is the output; the gradient reads only y. dy and dx are then one buffer, which cuDNN allows.
  const float* y = top.data_on(d);
  const float* x = bottom == &top ? y : bottom->data_on(d);
  cudnn::ActivationBackward(this->context(), activation_, desc_, y, top.diff_on(d), x, bottom->mutable_diff_on(d));
}

template class CudnnActivationLayer<ReLULayer, cudnn::ActivationMode::kReLU>;
template class CudnnActivationLayer<SigmoidLayer, cudnn::ActivationMode::kSigmoid>;
template class CudnnActivationLayer<TanHLayer, cudnn::ActivationMode::kTanh>;

}  // namespace crema

#endif  // CREMA_USE_CUDNN
