// ReLU, engine `cudnn` (GPU only, in builds with cuDNN): y = max(x, 0) through cuDNN's activation forward and
// backward (core/cudnn.hpp), in place or not. Parameters and checks as the native ReLU (layers/relu.hpp), whose
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

#include "core/cudnn.hpp"
#include "layers/layer_registry.hpp"
#include "layers/relu.hpp"

namespace crema {

class CudnnReLULayer : public ReLULayer {
 public:
  using ReLULayer::ReLULayer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  // Called on both devices by NeuronLayer; on the CPU they fail (the registry never picks this engine there).
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  bool empty_ = false;  // no values
  cudnn::TensorDescriptor desc_;
  cudnn::ActivationDescriptor relu_;
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
