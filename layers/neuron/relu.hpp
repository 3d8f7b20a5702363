// ReLU: y = max(x, 0) + negative_slope * min(x, 0), element by element (negative_slope > 0 gives the "leaky"
// form). One bottom, one top of the same shape; may run in place. Runs on the CPU and the GPU from the same
// rules (relu.cu compiles their kernels).
//
// Params (relu_param): negative_slope (default 0; a negative slope cannot run in place, see relu.cpp).
#pragma once

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

struct ReLUForward {
  const float* x;
  float* y;
  float slope;
  // Both sides computed, then one chosen: a select the compiler vectorizes, not a branch (the same values).
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float v = x[i], leaked = slope * v;
    y[i] = v > 0.f ? v : leaked;
  }
};

// `sign_source` is the input, or the output when in place (same sign, as the slope is then non-negative): floats, or
// 16-bit values (Sign uint16_t: float16, or bfloat16 where `bfloat16`), as a fused ReLU's output lies where the net's
// plan keeps it in that type (plan_element_types; ApplyFusedActivationBackward).
template <typename Sign>
struct ReLUBackwardOf {
  const Sign* sign_source;
  const float* dy;
  float* dx;
  float slope;
  bool bfloat16 = false;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float g = dy[i], leaked = slope * g;
    dx[i] = StoredValue(bfloat16, sign_source[i]) > 0.f ? g : leaked;
  }
};
using ReLUBackward = ReLUBackwardOf<float>;

class ReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU"; }
  FusedActivation AsFusedActivation() const override {
    return {FusedActivation::kReLU, param_.relu_param().negative_slope()};
  }
  // Backward reads its input.
  bool BackwardReadsTop(int) const override { return false; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Each value on its own: any layout, kept from bottom to top (a run of oneDNN layers goes through ReLU).
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }
  bool PassesLayoutThrough() const override { return true; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;
};

}  // namespace crema
