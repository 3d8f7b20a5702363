// Dropout: in the TRAIN phase each unit is kept with probability 1 - dropout_ratio and scaled by
// 1 / (1 - dropout_ratio), so the expected output equals the input and the TEST phase is the identity. With
// scale_train false the scaling moves to the TEST phase: TRAIN multiplies by the mask only and TEST multiplies
// every unit by 1 - dropout_ratio (the same expected output).
// One bottom, one top of the same shape; may run in place. Runs on the CPU and the GPU from the same rule
// (dropout.cu compiles its kernel).
//
// The mask is drawn on the layer's device by a counter-based generator (core/philox.hpp): each pass takes one
// 64-bit key from the layer's own random stream, and unit i is kept when value i of that key's Philox stream
// lies below 1 - dropout_ratio. So the mask is reproducible from the stream's state (a resumed run redraws the
// masks of the uninterrupted one), the same on the CPU and the GPU, and drawn in parallel on both. It is an
// internal blob ("<layer>.mask", 1 = kept), kept from forward to backward.
//
// Params (dropout_param): dropout_ratio in [0, 1) (default 0.5), scale_train (default true). The phase is the
// layer's `phase`.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "core/philox.hpp"
#include "layers/layer.hpp"

namespace crema {

// out = in * mask * scale: the forward pass on the data and, the same rule, the backward pass on the diffs.
struct DropoutApply {
  const float* in;
  const float* mask;
  float* out;
  float scale;
  CREMA_HOST_DEVICE void operator()(int i) const { out[i] = in[i] * mask[i] * scale; }
};

// mask[i] = 1 when value i of the key's stream is below `keep`, else 0.
struct DropoutMaskRule {
  uint64_t key;
  float keep;
  float* mask;
  CREMA_HOST_DEVICE void operator()(int i) const {
    mask[i] = PhiloxUniform(key, static_cast<uint32_t>(i)) < keep ? 1.f : 0.f;
  }
};

class DropoutLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Dropout"; }
  // The TEST phase copies its input where the scaling is done in training (scale_train, the default).
  bool ForwardIsIdentity() const override { return phase() == TEST && param_.dropout_param().scale_train(); }
  // Backward reads neither its input nor its output.
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // The mask of the last TRAIN forward pass (1 = kept), one entry per unit.
  const Blob& mask() const { return *mask_; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override;
  void BackwardElements(const Blob& top, Blob* bottom) override;

 private:
  float ratio_ = 0.5f;
  float scale_ = 2.f;       // the TRAIN phase's factor on kept units
  float test_scale_ = 1.f;  // the TEST phase's factor on every unit
  Blob* mask_ = nullptr;
};

}  // namespace crema
