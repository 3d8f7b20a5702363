// ReLU, engine `cudnn` (GPU only, in builds with cuDNN): y = max(x, 0) through cuDNN's activation forward and
// backward (core/cudnn.hpp), in place or not. Parameters and checks as the native ReLU (layers/neuron/relu.hpp), whose
// class it extends.
//
// Takes (Refusal): negative_slope 0 only. cuDNN's activations have no leaky ReLU (its clipped ReLU and ELU are
// other functions), and a slope cannot be made exact from cuDNN's pieces; the native engine, which runs on the
// GPU too, computes it.
//
// The gradient at x == 0 exactly: the native engine sends none (x > 0 selects); cuDNN does not document its
// choice there (others observed cuDNN's clipped ReLU sending none at 0 too). The GPU test pins it with exact zeros
// in the input.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/neuron/cudnn_activation.hpp"

namespace crema {

// cuDNN's activation in ReLU mode (CudnnActivationLayer, shared with Sigmoid and TanH), with ReLU's refusal.
class CudnnReLULayer : public CudnnActivationLayer<ReLULayer, cudnn::ActivationMode::kReLU> {
 public:
  using CudnnActivationLayer<ReLULayer, cudnn::ActivationMode::kReLU>::CudnnActivationLayer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
