// Sigmoid and TanH, engine `cudnn` (GPU only, in builds with cuDNN): cuDNN's activation forward and backward
// (core/cudnn.hpp) in sigmoid or tanh mode, in place or not. Each extends the native layer (layers/neuron/sigmoid.hpp,
// layers/neuron/tanh.hpp), whose parameters (none) and shapes it keeps; the two share CudnnActivationLayer, which
// ReLU's cudnn engine (layers/neuron/cudnn_relu.hpp) extends too.
//
// Takes (no refusal) every Sigmoid and TanH.
//
// Both gradients are functions of the output alone (y (1 - y), 1 - y^2), which cuDNN's backward reads; in place
// the input is gone, and the output stands in for it (for ReLU too: y > 0 exactly where x > 0).
#pragma once

#ifdef CREMA_USE_CUDNN

#include <vector>

#include "core/cudnn.hpp"
#include "layers/neuron/relu.hpp"
#include "layers/neuron/sigmoid.hpp"
#include "layers/neuron/tanh.hpp"

namespace crema {

// The engine for the native class Native (a NeuronLayer) computing cuDNN's activation kMode.
template <typename Native, cudnn::ActivationMode kMode>
class CudnnActivationLayer : public Native {
 public:
  using Native::Native;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // cuDNN's backward is given the output and, out of place, the input (whatever the native engine reads).
  bool BackwardReadsBottom(int) const override { return true; }
  bool BackwardReadsTop(int) const override { return true; }

 protected:
  // Called on both devices by NeuronLayer; on the CPU they fail (the registry never picks this engine there).
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  bool empty_ = false;  // no values
  cudnn::TensorDescriptor desc_;
  cudnn::ActivationDescriptor activation_;
};

using CudnnSigmoidLayer = CudnnActivationLayer<SigmoidLayer, cudnn::ActivationMode::kSigmoid>;
using CudnnTanHLayer = CudnnActivationLayer<TanHLayer, cudnn::ActivationMode::kTanh>;

extern template class CudnnActivationLayer<ReLULayer, cudnn::ActivationMode::kReLU>;
extern template class CudnnActivationLayer<SigmoidLayer, cudnn::ActivationMode::kSigmoid>;
extern template class CudnnActivationLayer<TanHLayer, cudnn::ActivationMode::kTanh>;

}  // namespace crema

#endif  // CREMA_USE_CUDNN
