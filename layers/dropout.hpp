// Dropout: in the TRAIN phase each unit is kept with probability 1 - dropout_ratio and scaled by
// 1 / (1 - dropout_ratio), so the expected output equals the input and the TEST phase is the identity.
// One bottom, one top of the same shape; may run in place.
//
// The mask is drawn from the layer's own random stream, one draw per unit in order, so it is reproducible
// from the stream's state (a resumed run redraws the masks of the uninterrupted one).
//
// Params (dropout_param): dropout_ratio in [0, 1) (default 0.5). The phase is the layer's `phase`.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class DropoutLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Dropout"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // The mask of the last TRAIN forward pass (1 = kept), one entry per unit.
  const std::vector<unsigned>& mask() const { return mask_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float ratio_ = 0.5f;
  float scale_ = 2.f;
  std::vector<unsigned> mask_;
};

}  // namespace crema
