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
// Internal blobs: `<layer>.gates` (T, N, 4H, the activated gates; its diff is Backward's scratch for
// their pre-activations' gradients), `<layer>.c` and `<layer>.h` ((T + 1, N, H): the states, index 0 the initial ones),
// and without expose_hidden `<layer>.h_carry`, `<layer>.c_carry` (see layers/recurrent/recurrent.hpp: the states
// carried to the next Forward, as Caffe does). Backward is backpropagation through time over the T steps.
// Differences from Caffe: those of layers/recurrent/recurrent.hpp (T may change; exposed states get gradients) and the
// exact forget-gate gradient for a cont other than 0 or 1 (see layers/recurrent/lstm_unit.hpp).
// Runs on the CPU and the GPU from the same code (see layers/recurrent/recurrent.hpp; lstm.cu compiles the rules below,
// which share the cell's arithmetic with LSTMUnit).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/recurrent/lstm_unit.hpp"
#include "layers/recurrent/recurrent.hpp"

namespace crema {

// Step t, cell k = n * H + d: the gate pre-activations (the input part, in `gates`, plus cont_t[n] times the
// recurrent part h_{t-1} W_hc^T) activated in place; c_t, h_t and the output row of step t.
struct LSTMStepForwardRule {
  float* gates;            // N x 4H
  const float* recurrent;  // N x 4H
  const float* cont;
  const float* c_prev;
  float* c;
  float* h;
  float* output;
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const int n = k / H;
    const long long at = static_cast<long long>(n) * 4 * H + k % H;
    float* gate = gates + at;
    const float* part = recurrent + at;
    const float flag = cont[n];
    c[k] = LSTMCellForward(gate[0] + flag * part[0], gate[H] + flag * part[H], gate[2 * H] + flag * part[2 * H],
                           gate[3 * H] + flag * part[3 * H], flag, c_prev[k], gate, H, h + k);
    output[k] = h[k];
  }
};

// Step t, cell k: the gate pre-activations' gradients from the output's gradient, the gradient of h_t from step
// t + 1 on (later[k] * later_cont[n]; later_cont null: the flags are already in; later null: none) and that of
// c_t (dc, which then becomes the gradient of c_{t-1}).
struct LSTMStepBackwardRule {
  const float* gates;  // N x 4H, activated
  const float* c_prev;
  const float* c;
  const float* top_diff;
  const float* later;
  const float* later_cont;
  const float* cont;
  float* dc;
  float* gate_diff;  // N x 4H
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const int n = k / H;
    const long long at = static_cast<long long>(n) * 4 * H + k % H;
    float dh = top_diff[k];
    if (later != nullptr) dh += later_cont != nullptr ? later_cont[n] * later[k] : later[k];
    const LSTMCellGradient grad = LSTMCellBackward(gates + at, H, cont[n], c_prev[k], c[k], dh, dc[k]);
    float* diff = gate_diff + at;
    diff[0] = grad.input;
    diff[H] = grad.forget;
    diff[2 * H] = grad.output;
    diff[3 * H] = grad.cell;
    dc[k] = grad.c_prev;
  }
};

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

  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* gates_ = nullptr;
  Blob* c_ = nullptr;
  Blob* h_ = nullptr;
};

}  // namespace crema
