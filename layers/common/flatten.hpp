// Flatten: merges axes axis..end_axis (inclusive) into one, e.g. N x C x H x W -> N x (C*H*W) with the
// defaults. The top is a view of the bottom (its data and diff, declared in TopViews and made by the net), so
// forward and backward move no values.
//
// Params (flatten_param): axis (default 1), end_axis (default -1); negative axes count from the end. With axis
// just after end_axis (axis 2, end_axis 1) nothing is merged and a size-1 axis is inserted before axis, as Caffe
// does, with a warning once for the layer; end_axis further before axis is an error.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class FlattenLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Flatten"; }
  // Backward reads no data (it a view).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  std::vector<TopView> TopViews(int num_tops) const override { return {{0, 0, true}}; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
  // Nothing moves on either device.
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  bool warned_inserted_axis_ = false;
};

}  // namespace crema
