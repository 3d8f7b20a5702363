// Input: a net's entry point for data the caller provides (deploy nets, classify). No bottoms; its tops are
// shaped once, at set-up, from input_param.shape (one shape per top, or a single shape for every top; with
// none, the tops keep the shapes the caller gives them). Later reshapes leave the tops alone, so a caller may
// reshape an input (another batch size) and reshape the net. Forward and backward do nothing.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class InputLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Input"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  bool TopsAreNetInputs() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
  // Nothing moves on either device.
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
};

}  // namespace crema
