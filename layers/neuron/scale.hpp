// Scale: multiplies the first bottom by a scale broadcast along some of its axes, optionally adding a bias:
//   top[o, d, i] = bottom[o, d, i] * scale[d] (+ bias[d]),
// where the scale's shape equals the bottom's shape over axes [axis, axis + scale axes) (see layers/neuron/bias.hpp).
//
// scale_param:
//   axis         the bottom's axis where the scale's shape starts (default 1); negative counts from the end;
//                ignored (taken as 0) for a scale of no axes
//   num_axes     how many axes a learned scale spans (default 1; -1: to the end; 0: a scalar)
//   filler       initialises a learned scale (default constant 1)
//   bias_term    also add a learned bias of the scale's shape (default false)
//   bias_filler  initialises the bias (default constant 0)
// Bottoms -> tops: 1 or 2 -> 1 (in place allowed). Blobs, in Caffe's order: with one bottom, the learned scale
// (bottom.shape[axis : axis + num_axes]) then the bias if bias_term; with two, the second bottom is the scale
// (not learned, num_axes ignored; it gets a gradient when asked) and the only blob is the bias if bias_term.
// In place, forward keeps a copy of the input (internal blob `<layer>.input`) for the scale's gradient, unless the
// layer before it keeps those values itself (a BatchNorm's normalized values: Layer::BorrowKeptInput).
// A learned per-channel scale of a 4-d bottom (axis 1, one axis: a ResNet's Scale after BatchNorm) reads the
// bottom in any layout (core/layout.hpp) and writes the top in it, so a run of oneDNN layers goes through it;
// every sum runs in the order of the plain layout, so results do not depend on the layout.
// Runs on the CPU (its own loops, which read every layout and sum in double) and on the GPU (the plain layout: the
// rules below, which scale.cu compiles; the bias's and the scale's gradients summed in one pass over dy and x,
// core/channel_sums.hpp).
#pragma once

#include <vector>

#include "core/channel_sums.hpp"
#include "core/elementwise.hpp"
#include "layers/layer.hpp"
#include "layers/neuron/bias.hpp"

namespace crema {

// y = x * scale (+ bias, where there is one), value j taking operand index (j / inner) % dim.
struct ScaleForwardRule {
  const float* x;
  const float* scale;
  const float* bias;  // nullptr: none
  float* y;
  int dim, inner;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const int d = j / inner % dim;
    y[j] = bias != nullptr ? x[j] * scale[d] + bias[d] : x[j] * scale[d];
  }
};

// The gradients' terms per broadcast index (sum_per_channel): dy (the bias's) and dy * x (the scale's; 0 where x is
// null, when only the bias learns).
struct ScaleGradientTerms {
  static constexpr int kTerms = 2;
  const float* dy;
  const float* x;
  CREMA_HOST_DEVICE void operator()(int j, int, float* terms) const {
    terms[0] = dy[j];
    terms[1] = x != nullptr ? dy[j] * x[j] : 0.f;
  }
};

class ScaleLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Scale"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool BackwardReadsTop(int) const override { return false; }  // the input (and the scale bottom) only
  bool ThreadCountChangesPass(bool) const override { return false; }  // each thread sums whole channels
  bool ReadsLayout(int bottom, Layout layout) const override {
    return layout == Layout::kPlain || (bottom == 0 && per_channel_);
  }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override {
    return per_channel_ ? bottom_layouts[0] : Layout::kPlain;
  }
  bool PassesLayoutThrough() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // A learned scale (and bias) per channel of axis 1, or one for every value: its values.
  bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  const Blob& ScaleOf(const std::vector<Blob*>& bottom) const { return bottom.size() > 1 ? *bottom[1] : *params_[0]; }

  Broadcast geometry_;
  bool per_channel_ = false;  // a learned scale over axis 1 of a 4-d bottom (any layout)
  int block_ = 1;             // the bottom's channel block (core/layout.hpp): 1 when plain
  bool bias_term_ = false;
  int bias_index_ = -1;  // index of the bias in params_, -1 without one
};

}  // namespace crema
