// What Caffe's recurrent layers (LSTM, RNN) share: bottoms, tops, recurrent_param, the input transform and its
// gradient, and the hidden state carried from one Forward to the next. Not a layer type of its own.
//
// recurrent_param: num_output (H, required), weight_filler, bias_filler, expose_hidden (false), debug_info
// (accepted, unused).
// Bottoms: x (T, N, ...) with D = x.count(2) values per item, cont (T, N), an optional static input
// x_static (N, ...) with D_static = x_static.count(1), then with expose_hidden the initial states (each
// (1, N, H): h_0 for RNN; h_0, c_0 for LSTM). Tops: the output (T, N, H), then with expose_hidden the final
// states (h_T; h_T, c_T). The static input is there when there is one bottom more than these.
// Learned blobs begin, as in Caffe, with W_x (G, D) and b (G) (G: the width of the gate input, 4H for LSTM,
// H for RNN), then W_x_static (G, D_static) when there is a static input; the layer adds the rest.
//
// As in Caffe, without expose_hidden the final states of one Forward are the initial states of the next
// (zeros at first and whenever N changes); they are kept in internal blobs `<layer>.<state>_carry` and get
// no gradient (a sequence that goes on across batches is cut there for backward, as in Caffe). At t with
// cont = 0 the previous state is multiplied by 0, which starts a new sequence. cont gets no gradient.
// Differences from Caffe: T may change between calls (Caffe refuses); with expose_hidden the initial states
// get their gradients and the final states' top gradients flow back (Caffe's unrolled net drops both).
//
// Devices: the layers' code is written once for the CPU and the GPU (Forward_any, Backward_any): matrix products
// on the context (the input transform of all T steps in one product, one recurrent product per step, the
// recurrent weights' gradient in one product over all steps) and per-cell rules for the non-linearities
// (recurrent.cu, rnn.cu and lstm.cu compile them). Only the loop over time runs on the host; it reads no data.
#pragma once

#include <string>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// y = cont[i / width] * x (in place allowed): rows of `width` values, one per stream (and step), scaled by their
// continuation flags. Gives the gradient of an initial state, and scales the gate inputs' gradients of all steps
// for the recurrent weights' gradient.
struct RecurrentContRule {
  const float* cont;
  const float* x;
  float* y;
  int width;
  CREMA_HOST_DEVICE void operator()(int i) const { y[i] = cont[i / width] * x[i]; }
};

class RecurrentLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  int MinBottomBlobs() const override { return 2 + (expose_hidden() ? num_states() : 0); }
  int MaxBottomBlobs() const override { return MinBottomBlobs() + 1; }
  int ExactNumTopBlobs() const override { return 1 + (expose_hidden() ? num_states() : 0); }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final;

 protected:
  // The learned blob a layer adds after W_x, b and W_x_static.
  struct ParamBlob {
    const char* name;
    std::vector<int> shape;
    bool bias;  // filled with bias_filler, else weight_filler
  };
  // 1 (RNN: h) or 2 (LSTM: h, c); the names of the states ("h", "c").
  virtual int num_states() const = 0;
  virtual const char* state_name(int k) const = 0;
  // G: the width of the gate input (4H for LSTM, H for RNN); the names of W_x, b and W_x_static in Caffe.
  virtual int gate_width() const = 0;
  virtual std::vector<const char*> input_blob_names() const = 0;
  virtual std::vector<ParamBlob> more_param_blobs() const = 0;
  // The layer's internal blobs: created in LayerSetUp, shaped in Reshape (T_, N_ set).
  virtual void AddInternalBlobs() = 0;
  virtual void ReshapeInternalBlobs() = 0;

  bool expose_hidden() const { return param_.recurrent_param().expose_hidden(); }
  int state_bottom(int k) const { return 2 + (static_input_ ? 1 : 0) + k; }
  // The index of the first blob the layer adds (after W_x, b and W_x_static).
  int first_more_blob() const { return static_input_ ? 3 : 2; }

  // gate_input (T*N, G) = x W_x^T + b (+ x_static W_x_static^T at every step when there is a static input).
  // `scratch` holds N*G floats.
  void ForwardInput(const std::vector<Blob*>& bottom, float* gate_input, float* scratch);
  // From the gate input's gradient (T*N, G): gradients of W_x, b, W_x_static and of x, x_static. `scratch` holds
  // N*G floats.
  void BackwardInput(const std::vector<Blob*>& bottom, const std::vector<bool>& propagate_down, const float* gate_diff,
                     float* scratch);
  // The initial value of state k (1, N, H) into `dst`: the bottom with expose_hidden, else the carried state.
  void InitialState(const std::vector<Blob*>& bottom, int k, float* dst);
  // After Forward: state k at T (`src`, N*H) to its top with expose_hidden, else into the carry.
  void FinalState(const std::vector<Blob*>& top, int k, const float* src);
  // With expose_hidden, the top gradient of final state k (N*H, on the layer's device); else null: no gradient
  // comes from beyond T.
  const float* FinalStateDiff(const std::vector<Blob*>& top, int k) const;
  // Where the gradient of initial state k goes (its bottom's diff), when exposed and asked for; else null.
  float* InitialStateDiff(const std::vector<Blob*>& bottom, const std::vector<bool>& propagate_down, int k) const;
  // The recurrent weights' gradient over all steps, in one product: W_diff (G, H) += sum_t (cont_t gate_diff_t)^T
  // h_{t-1}, gate_diff (T*N, G) the gate inputs' gradient and h the states (T + 1, N, H) from the initial one. The
  // flags scale gate_diff in place (no scratch of T*N*H floats), so it is spent: this comes last in Backward.
  void AccumulateRecurrentWeightDiff(const std::vector<Blob*>& bottom, float* gate_diff, const float* h, Blob* weights);
  // Caffe's recurrent layers give cont no gradient.
  void CheckNoContGradient(const std::vector<bool>& propagate_down) const;

  int T_ = 0, N_ = 0, H_ = 0, D_ = 0, D_static_ = 0;
  bool static_input_ = false;

 private:
  void CheckShapes(const std::vector<Blob*>& bottom) const;
  std::vector<Blob*> carry_;
  int carry_N_ = -1;
};

}  // namespace crema
