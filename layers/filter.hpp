// Filter: keeps the items (entries of the first axis) that a selector picks. Bottoms: one or more data blobs
// with the same number of items N, then the selector (N values, any shape of N elements: nonzero keeps the
// item). Tops: one per data bottom, holding the kept items in order; their first axis is the number kept, so
// it follows the selector's values (the net reshapes this layer before every forward pass). Backward sends
// each kept item's gradient back to its place and zero to the dropped ones; the selector gets no gradient.
// No parameters.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class FilterLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Filter"; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index + 1 < num_bottoms_; }
  bool ReshapesOnData() const override { return true; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int num_bottoms_ = 0;
  std::vector<int> kept_;  // the items the selector picked, in order
};

}  // namespace crema
