// Filter: keeps the items (entries of the first axis) that a selector picks. Bottoms: one or more data blobs
// with the same number of items N, then the selector (N values, any shape of N elements: nonzero keeps the
// item). Tops: one per data bottom, holding the kept items in order; their first axis is the number kept, so
// it follows the selector's values (the net reshapes this layer before every forward pass). Backward sends
// each kept item's gradient back to its place and zero to the dropped ones; the selector gets no gradient.
// No parameters.
// Runs on the CPU and the GPU (the rules below; filter.cu compiles them). Both read the selector on the host, in
// Reshape; the GPU's rules find the kept items in lists its forward pass writes on the host from that reading.
#pragma once

#include <string>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One value of a top per call: its kept item's value.
struct FilterForwardRule {
  const float* data;
  const float* kept;  // the kept items, in order
  float* top;
  int item;  // values per item
  CREMA_HOST_DEVICE void operator()(int i) const {
    top[i] = data[static_cast<long long>(kept[i / item]) * item + i % item];
  }
};

// One value of a data bottom's gradient per call: its top's gradient if the item was kept, else 0.
struct FilterBackwardRule {
  const float* top_diff;
  const float* place;  // per item, its place among the kept, or -1
  float* data_diff;
  int item;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const int p = static_cast<int>(place[j / item]);
    data_diff[j] = p >= 0 ? top_diff[static_cast<long long>(p) * item + j % item] : 0.f;
  }
};

class FilterLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Filter"; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index + 1 < num_bottoms_; }
  bool ReshapesOnData() const override { return true; }
  // The positions of the items kept, from Forward to Backward.
  std::vector<HeldBuffer> HeldBuffers() const override {
    return {{"the positions of the " + std::to_string(kept_.size()) + " items kept", sizeof(int) * kept_.size(),
             Device::kCPU}};
  }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int num_bottoms_ = 0;
  std::vector<int> kept_;  // the items the selector picked, in order
  // kept_, and each item's place in it (or -1), as floats for the GPU's rules (exact below 2^24 items).
  Blob kept_items_, places_;
};

}  // namespace crema
