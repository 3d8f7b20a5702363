// Softmax, engine `cudnn` (GPU only, in builds with cuDNN): cuDNN's softmax forward and backward
// (core/cudnn.hpp) along any axis. The bottom is seen as outer x classes x inner x 1 around the softmax axis
// (Layer::SplitAtClassAxis), the 4-d tensor whose channels cuDNN's CUDNN_SOFTMAX_MODE_CHANNEL normalises at every
// other position; CUDNN_SOFTMAX_ACCURATE subtracts the maximum first, as the native engine does, so the two agree
// to float rounding. Parameters and checks as the native Softmax (layers/common/softmax.hpp): softmax_param.axis.
//
// Takes (Refusal) every softmax the native engine takes (cuDNN's tensor describes any outer x classes x inner),
// except one in place (top = bottom): cuDNN does not document in-place softmax, so the native engine, whose rules
// are written for it, serves those.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <string>
#include <vector>

#include "core/cudnn.hpp"
#include "layers/layer.hpp"
#include "layers/layer_registry.hpp"

namespace crema {

class CudnnSoftmaxLayer : public GpuOnly<Layer> {
 public:
  using GpuOnly<Layer>::GpuOnly;
  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  bool empty_ = false;            // no values
  cudnn::TensorDescriptor desc_;  // outer x classes x inner x 1, for the bottom, the top and their gradients
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
