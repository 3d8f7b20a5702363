// Concat: joins its bottoms along one axis, y = [x_0, x_1, ...]. Every other axis must have the same size in
// all bottoms; the top's size along the axis is the sum of theirs. Backward hands each bottom its own part
// of the top's gradient.
//
// Params (concat_param): axis (default 1; negative counts from the end), or the deprecated concat_dim
// (non-negative only; used when given, and then axis may not be given too).
// Bottoms -> tops: 1..n -> 1.
// Differs from Caffe: with a single bottom the values are copied rather than the top sharing the bottom's
// memory (the result is the same).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ConcatLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Concat"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 protected:
  int axis_ = 1;
  int outer_ = 1;  // product of the axes before the concatenation axis
  int inner_ = 1;  // product of the axes after it
};

}  // namespace crema
