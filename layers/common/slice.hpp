// Slice: cuts its bottom along one axis into consecutive parts, one per top (the inverse of Concat).
// slice_point lists where each part after the first begins (one point fewer than tops, strictly increasing,
// inside the axis; the last may be the axis' end, as Caffe allows: the last top is then empty, size 0 along the
// axis, with a warning once for the layer); without slice points the axis is cut into equal parts, and the number of tops must divide
// its size. Backward puts the tops' gradients back together into the bottom's.
//
// Params (slice_param): axis (default 1; negative counts from the end), or the deprecated slice_dim
// (non-negative only; used when given, and then axis may not be given too); slice_point (repeated).
// Bottoms -> tops: 1 -> 1..n.
// Runs on the CPU (block copies) and the GPU (Concat's CutAlongAxis and JoinAlongAxis, from concat.hpp).
// Differs from Caffe: with a single top the values are copied rather than shared (the result is the same),
// and slice points that do not increase are refused with a message instead of failing on a negative shape.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class SliceLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Slice"; }
  // Backward reads no data (it gathers the parts' gradients).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int axis_ = 1;
  int outer_ = 1;  // product of the axes before the slicing axis
  int inner_ = 1;  // product of the axes after it
  bool warned_empty_top_ = false;
};

}  // namespace crema
