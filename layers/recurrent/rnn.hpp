// RNN: Caffe's plain (Elman) recurrent layer, computed directly as a loop over time (not an unrolled net).
//
// recurrent_param: num_output (H, required), weight_filler, bias_filler, expose_hidden (false).
// Bottoms x (T, N, ...), cont (T, N), [x_static (N, ...)], and with expose_hidden h_0 (1, N, H).
// Tops o (T, N, H), and with expose_hidden h_T (1, N, H). D = x.count(2), D_s = x_static.count(1).
// For t = 1..T:
//   h_t = tanh(W_xh x_t + b_h + W_xh_static x_static + W_hh (cont_t h_{t-1}))
//   o_t = tanh(W_ho h_t + b_o)
// so a step with cont_t = 0 starts a sequence (the previous h counts as 0).
// Learned blobs, in Caffe's order (so that .caffemodel weights load): W_xh (H, D), b_h (H),
// [W_xh_static (H, D_s) with a static input], W_hh (H, H), W_ho (H, H), b_o (H); weights from weight_filler,
// biases from bias_filler.
// Internal blobs: `<layer>.h` ((T + 1, N, H), index 0 the initial state; its diff is Backward's scratch for the
// gradients of the pre-activations), `<layer>.o` (T, N, H, the outputs, so that Backward reads no top data), and
// without expose_hidden `<layer>.h_carry` (see layers/recurrent/recurrent.hpp: the state carried to the next Forward,
// as Caffe does). Backward is backpropagation through time over the T steps.
// Differences from Caffe: those of layers/recurrent/recurrent.hpp (T may change; the exposed state gets gradients).
// Runs on the CPU and the GPU from the same code (see layers/recurrent/recurrent.hpp; rnn.cu compiles the rules below).
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/recurrent/recurrent.hpp"

namespace crema {

// Step t, cell k = n * H + d: h_t = tanh(pre + cont_t[n] * recurrent), in place on the pre-activation (the
// input part); recurrent = h_{t-1} W_hh^T.
struct RNNStepForwardRule {
  float* h;
  const float* recurrent;
  const float* cont;
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const { h[k] = tanhf(h[k] + cont[k / H] * recurrent[k]); }
};

// o = tanh(o) in place (o holds W_ho h + b_o), copied to the top.
struct RNNOutputRule {
  float* o;
  float* top;
  CREMA_HOST_DEVICE void operator()(int k) const {
    o[k] = tanhf(o[k]);
    top[k] = o[k];
  }
};

// The gradient of W_ho h + b_o from the top's: dtop (1 - o^2).
struct RNNOutputBackwardRule {
  const float* o;
  const float* top_diff;
  float* o_diff;
  CREMA_HOST_DEVICE void operator()(int k) const { o_diff[k] = top_diff[k] * (1.f - o[k] * o[k]); }
};

// Step t, cell k: diff (the gradient of h_t from the outputs) becomes that of h_t's pre-activation, adding the
// gradient from step t + 1 on, later[k] * later_cont[n] (later_cont null: the flags are already in; later null:
// none).
struct RNNStepBackwardRule {
  const float* h;
  float* diff;
  const float* later;
  const float* later_cont;
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const {
    float from_later = 0.f;
    if (later != nullptr) from_later = later_cont != nullptr ? later_cont[k / H] * later[k] : later[k];
    diff[k] = (diff[k] + from_later) * (1.f - h[k] * h[k]);
  }
};

class RNNLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "RNN"; }

 protected:
  int num_states() const override { return 1; }
  const char* state_name(int) const override { return "h"; }
  int gate_width() const override { return H_; }
  std::vector<const char*> input_blob_names() const override { return {"W_xh", "b_h", "W_xh_static"}; }
  std::vector<ParamBlob> more_param_blobs() const override {
    return {{"W_hh", {H_, H_}, false}, {"W_ho", {H_, H_}, false}, {"b_o", {H_}, true}};
  }
  void AddInternalBlobs() override;
  void ReshapeInternalBlobs() override;

  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  Blob* h_ = nullptr;
  Blob* o_ = nullptr;
};

}  // namespace crema
