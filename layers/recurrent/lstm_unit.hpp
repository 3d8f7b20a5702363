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
//
// Runs on the CPU and the GPU from the same rules, one per cell (n, d) (lstm_unit.cu compiles them). The cell's
// arithmetic (LSTMCellForward, LSTMCellBackward) is shared with the LSTM layer.
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

CREMA_HOST_DEVICE inline float LSTMSigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// One cell's forward step: activates the gate pre-activations (i', f', o', g') into gate[0], gate[H], gate[2H],
// gate[3H] (i, f, o = sigmoid, g = tanh), sets *h = o tanh(c) and returns c = cont f c_prev + i g.
CREMA_HOST_DEVICE inline float LSTMCellForward(float i_in, float f_in, float o_in, float g_in, float cont, float c_prev,
                                               float* gate, int H, float* h) {
  const float i = LSTMSigmoid(i_in), f = LSTMSigmoid(f_in), o = LSTMSigmoid(o_in), g = tanhf(g_in);
  gate[0] = i;
  gate[H] = f;
  gate[2 * H] = o;
  gate[3 * H] = g;
  const float c = cont * f * c_prev + i * g;
  *h = o * tanhf(c);
  return c;
}

// The gradients of one cell's step: of the four gate pre-activations and of c_prev.
struct LSTMCellGradient {
  float input, forget, output, cell, c_prev;
};

// One cell's backward step, from its activated gates (gate[0], gate[H], ...), c_prev and c, and the gradients of
// h (dh) and of c from later on (dc_later).
CREMA_HOST_DEVICE inline LSTMCellGradient LSTMCellBackward(const float* gate, int H, float cont, float c_prev, float c,
                                                           float dh, float dc_later) {
  const float i = gate[0], f = gate[H], o = gate[2 * H], g = gate[3 * H];
  const float tanh_c = tanhf(c);
  const float dc = dc_later + dh * o * (1.f - tanh_c * tanh_c);
  return {dc * g * i * (1.f - i), dc * cont * c_prev * f * (1.f - f), dh * tanh_c * o * (1.f - o),
          dc * i * (1.f - g * g), dc * cont * f};
}

// Forward, cell k = n * H + d: gates (1, N, 4H), c and h (1, N, H).
struct LSTMUnitForwardRule {
  const float* c_prev;
  const float* x;
  const float* cont;
  float* gates;
  float* c;
  float* h;
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const int n = k / H;
    const long long at = static_cast<long long>(n) * 4 * H + k % H;
    const float* xn = x + at;
    c[k] = LSTMCellForward(xn[0], xn[H], xn[2 * H], xn[3 * H], cont[n], c_prev[k], gates + at, H, h + k);
  }
};

// Backward, cell k: the gradients of c_prev and of x's four gate inputs (each null when not wanted). c is
// recomputed from the gates, so that no top's data is read.
struct LSTMUnitBackwardRule {
  const float* c_prev;
  const float* cont;
  const float* gates;
  const float* c_diff;
  const float* h_diff;
  float* c_prev_diff;
  float* x_diff;
  int H;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const int n = k / H;
    const long long at = static_cast<long long>(n) * 4 * H + k % H;
    const float* gate = gates + at;
    const float c = cont[n] * gate[H] * c_prev[k] + gate[0] * gate[3 * H];
    const LSTMCellGradient grad = LSTMCellBackward(gate, H, cont[n], c_prev[k], c, h_diff[k], c_diff[k]);
    if (c_prev_diff != nullptr) c_prev_diff[k] = grad.c_prev;
    if (x_diff != nullptr) {
      float* dx = x_diff + at;
      dx[0] = grad.input;
      dx[H] = grad.forget;
      dx[2 * H] = grad.output;
      dx[3 * H] = grad.cell;
    }
  }
};

class LSTMUnitLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "LSTMUnit"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int num_ = 0, hidden_ = 0;
  Blob* gates_ = nullptr;
};

}  // namespace crema
