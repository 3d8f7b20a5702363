// ReLU on cuDNN (see cudnn_relu.hpp).
#include "layers/neuron/cudnn_relu.hpp"

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
  CudnnActivationLayer<ReLULayer, cudnn::ActivationMode::kReLU>::Reshape(bottom, top);
  CREMA_CHECK(param_.relu_param().negative_slope() == 0.f)
      << describe() << ": the cudnn engine computes ReLU without a negative_slope (its refusal should have said so)";
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
