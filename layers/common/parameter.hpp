// Parameter: a learned blob as a layer's output (parameter_param.shape), so that a prototxt can feed a
// trained tensor into any layer (a learned scale as Scale's second bottom, say). No bottoms, one top of that
// shape. The blob starts at zero (Caffe gives it no filler) or comes from a .caffemodel; the top's gradient
// is added to the blob's.
// Runs on the CPU and the GPU from the same code (the context's copy and axpy).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ParameterLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Parameter"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace crema
