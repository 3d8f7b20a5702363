// LSTMUnit: one time step of an LSTM cell, as Caffe's LSTMUnit layer (the unit its LSTM layer unrolls into).
//
// Bottoms: c_prev (1, N, H), x (1, N, 4H) the gate inputs in Caffe's order (i, f, o, g), cont (1, N) the
// sequence continuation flags. Tops: c (1, N, H), h (1, N, H). For each stream n and unit d:
//   i = sigmoid(x_i), f = sigmoid(x_f), o = sigmoid(x_o), g = tanh(x_g)
//   c = cont * f * c_prev + i * g        (cont = 0: a sequence starts, c_prev is forgotten)
//   h = o * tanh(c)
// No parameters, no learned blobs. Gradients go to c_prev and x; cont gets none (asking for it is an error
// naming the layer, and force_backward leaves it alone). The activated gates (1, N, 4H) are kept from
// Forward to Backward in the internal blob `<layer>.gates`, so Backward reads neither top's data.
// Difference from Caffe: the gradient of x_f is exact for any cont (dc * cont * c_prev * f (1 - f)); Caffe's
// leaves one factor of cont out, which only matters for a cont other than 0 or 1.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class LSTMUnitLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LSTMUnit"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int num_ = 0, hidden_ = 0;
  Blob* gates_ = nullptr;
};

}  // namespace crema
