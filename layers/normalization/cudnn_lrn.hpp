// LRN, engine `cudnn` (GPU only, in builds with cuDNN): ACROSS_CHANNELS through cuDNN's cross-channel LRN forward and
// backward (core/cudnn.hpp). Parameters and checks as the native LRN (layers/normalization/lrn.hpp), whose class it
// extends. cuDNN's formula is Caffe's: both divide alpha by the window's size, and an odd window is centred in both, so
// local_size, alpha, beta and k go to cuDNN unchanged.
//
// Takes (Refusal): ACROSS_CHANNELS with the parameters cuDNN accepts: local_size from 1 to 16 (odd: the native
// layer's own rule), k at least 1e-5, beta at least 0.01. WITHIN_CHANNEL is refused: cuDNN's divisive
// normalisation is another function (it subtracts given means and has no k), and the native engine, which runs on
// the GPU too, computes it.
//
// cuDNN's backward reads the output y. The engine keeps no copy of it: backward computes y again from x into the
// workspace (one more forward pass, the size of the input), so that, as with the native engine, a later in-place
// layer may overwrite the top.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <string>
#include <vector>

#include "core/cudnn.hpp"
#include "layers/layer_registry.hpp"
#include "layers/normalization/lrn.hpp"

namespace crema {

class CudnnLRNLayer : public GpuOnly<LRNLayer> {
 public:
  using GpuOnly<LRNLayer>::GpuOnly;
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  bool empty_ = false;            // no values
  cudnn::TensorDescriptor desc_;  // the bottom, the top and their gradients (N, C, H, W)
  cudnn::LRNDescriptor lrn_;
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
