// Softmax along one axis: y = exp(x - max) / sum(exp(x - max)), the maximum taken along that axis so that no
// exponential overflows. The bottom is viewed as outer x channels x inner, with channels the softmax axis;
// the top has the bottom's shape.
//
// Params (softmax_param): axis (default 1; negative counts from the end).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  ClassAxis split_{};
};

}  // namespace crema
