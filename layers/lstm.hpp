// LSTM: Caffe's long short-term memory layer, computed directly as a loop over time (not an unrolled net).
//
// recurrent_param: num_output (H, required), weight_filler, bias_filler, expose_hidden (false).
// Bottoms x (T, N, ...), cont (T, N), [x_static (N, ...)], and with expose_hidden h_0, c_0 (1, N, H).
// Tops h (T, N, H), and with expose_hidden h_T, c_T (1, N, H). D = x.count(2), D_s = x_static.count(1).
// For t = 1..T (gates in Caffe's order i, f, o, g):
//   [i' f' o' g'] = W_xc x_t + b_c + W_xc_static x_static + W_hc (cont_t h_{t-1})
//   i, f, o = sigmoid(i', f', o'), g = tanh(g')
//   c_t = cont_t f c_{t-1} + i g,  h_t = o tanh(c_t)
// so a step with cont_t = 0 starts a sequence (the previous h and c count as 0).
// Learned blobs, in Caffe's order (so that .caffemodel weights load): W_xc (4H, D), b_c (4H),
// [W_xc_static (4H, D_s) with a static input], W_hc (4H, H); weights from weight_filler, b_c from bias_filler.
// Internal blobs: `<layer>.gates` (T, N, 4H, the activated gates; its diff holds their pre-activation
// gradients in Backward), `<layer>.c` and `<layer>.h` ((T + 1, N, H): the states, index 0 the initial ones),
// and without expose_hidden `<layer>.h_carry`, `<layer>.c_carry` (see layers/recurrent.hpp: the states
// carried to the next Forward, as Caffe does). Backward is backpropagation through time over the T steps.
// Differences from Caffe: those of layers/recurrent.hpp (T may change; exposed states get gradients) and the
// exact forget-gate gradient for a cont other than 0 or 1 (see layers/lstm_unit.hpp).
#pragma once

#include <vector>

#include "layers/recurrent.hpp"

namespace crema {

class LSTMLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "LSTM"; }

 protected:
  int num_states() const override { return 2; }
  const char* state_name(int k) const override { return k == 0 ? "h" : "c"; }
  int gate_width() const override { return 4 * H_; }
  std::vector<const char*> input_blob_names() const override { return {"W_xc", "b_c", "W_xc_static"}; }
  std::vector<ParamBlob> more_param_blobs() const override { return {{"W_hc", {4 * H_, H_}, false}}; }
  void AddInternalBlobs() override;
  void ReshapeInternalBlobs() override;

  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* gates_ = nullptr;
  Blob* c_ = nullptr;
  Blob* h_ = nullptr;
};

}  // namespace crema
