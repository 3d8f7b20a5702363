// ArgMax: the indices of the top_k largest values, largest first.
//   Without argmax_param.axis: over all of each item's values (the bottom seen as N x (everything else)); the
//   top has shape N x 1 x top_k (with more axes of size 1 when the bottom has more than 3), or N x 2 x top_k
//   with out_max_val: the indices in channel 0 and the values in channel 1.
//   With an axis: along that axis at every other position; the top has the bottom's shape with top_k along
//   the axis, holding the indices, or with out_max_val the values instead.
// Equal values are ordered by index, the higher index first (Caffe's order: it sorts (value, index) pairs
// in descending order).
//
// Params (argmax_param): out_max_val (default false), top_k (default 1, at least 1, at most the values
// compared), axis (optional; negative counts from the end).
// Bottoms -> tops: 1 -> 1.
// No gradient, as in Caffe: backward with propagate_down set is an error naming the layer, and force_backward
// does not reach through it.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ArgMaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ArgMax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int top_k_ = 1;
  int axis_ = -1;     // the canonical axis, or -1 without argmax_param.axis
  int compared_ = 1;  // values compared for one result
  int inner_ = 1;     // stride between them (1 without an axis)
};

}  // namespace crema
