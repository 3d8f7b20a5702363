// ReLU: y = max(x, 0) + negative_slope * min(x, 0), element by element (negative_slope > 0 gives the "leaky"
// form). One bottom, one top of the same shape; may run in place.
//
// Params (relu_param): negative_slope (default 0; a negative slope cannot run in place, see relu.cpp).
#pragma once

#include "layers/layer.hpp"

namespace crema {

class ReLULayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ReLU"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace crema
