// PReLU: y = max(x, 0) + a_c * min(x, 0), where a_c is a learned slope of the input's channel (axis 1), or one
// slope shared by every channel. One bottom (at least 2-d, channels on axis 1), one top of the same shape; may
// run in place: the backward pass needs the input, so in place the forward pass first copies it into an internal
// blob ("<layer>.input"). CPU only (the slopes' gradient is a reduction over each channel, done on the host).
//
// Params (prelu_param): filler (of the slopes; default constant 0.25), channel_shared (default false).
// Parameter blob: the slopes, shape (channels), or (1) when channel_shared. Backward accumulates into their diff.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class PReLULayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "PReLU"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  void CheckShape(const Blob& bottom) const;
  bool channel_shared_ = false;
  int channels_ = 0;
  Blob* input_copy_ = nullptr;  // in place only
};

}  // namespace crema
