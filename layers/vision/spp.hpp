// SPP (spatial pyramid pooling): pools each channel of a 4-d (N, C, H, W) input at pyramid_height levels,
// level l into 2^l x 2^l bins whatever H and W are, and concatenates every level's bins into one vector per
// item: top (N, C * (1 + 4 + ... + 4^(pyramid_height - 1))), level 0 first, each level channel-major. With
// pyramid_height 1 the top is the single level's (N, C, 1, 1). A level's bins are Pooling windows of
// kernel ceil(H / bins), the same stride, and pad (kernel * bins - H + 1) / 2 (likewise along W), as in Caffe.
// spp_param: pyramid_height (required, >= 1), pool (MAX, AVE, STOCHASTIC). Each level is a Pooling layer run
// by this one (its argmax or sample kept inside it); the levels are set up again when H or W change.
// Runs on the CPU and the GPU: the levels' Pooling layers run on the layer's device, and the rule below (spp.cu
// compiles it) moves each level's values into the top and the top's gradient back.
#pragma once

#include <memory>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"
#include "layers/vision/pooling.hpp"

namespace crema {

// Value i of a level (item i / size, `size` values an item) and its place in the top (`item` values an item, the
// level's from `offset` on): forward copies level -> top, backward (gradients) top -> level.
struct SPPLevelCopyRule {
  const float* from;
  float* to;
  int size, item, offset;
  bool to_top;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const long long place = static_cast<long long>(i / size) * item + offset + i % size;
    if (to_top) {
      to[place] = from[i];
    } else {
      to[i] = from[place];
    }
  }
};

class SPPLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "SPP"; }
  // As its Pooling levels: the argmax (an internal blob), and the input only for STOCHASTIC outside training.
  bool BackwardReadsBottom(int) const override {
    return param_.spp_param().pool() == SPPParameter::STOCHASTIC && phase() != TRAIN;
  }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Sets up one Pooling layer per level for an input of height x width.
  void BuildLevels(const Blob& input);

  int levels_ = 0;
  int height_ = -1, width_ = -1;
  std::vector<std::unique_ptr<PoolingLayer>> pools_;
  std::vector<Blob*> pooled_;       // each level's output (internal blobs)
  // What each level's Pooling keeps from forward to backward (MAX: the argmax, STOCHASTIC: the samples): internal
  // blobs of this layer, lent to the Pooling layers, so that the net plans them.
  std::vector<std::shared_ptr<Blob>> level_kept_;
  Blob* level_gradient_ = nullptr;  // the bottom's data with a gradient of its own, for levels after the first
};

}  // namespace crema
