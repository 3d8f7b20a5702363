// Reshape: gives the bottom's values a new shape without moving them. The top is a view of the bottom (its
// data and diff, declared in TopViews and made by the net), so forward and backward move no values.
//
// Params (reshape_param): shape (the new dimensions: 0 copies the bottom's dimension at the same place, one
// -1 is inferred from the bottom's count), axis (default 0) and num_axes (default -1: to the end) choose the
// range of the bottom's axes that `shape` replaces; the axes before and after it are kept. A negative axis
// counts from the end, -1 meaning "after the last axis" (so axis -1, num_axes 0 appends `shape`).
// Bottoms -> tops: 1 -> 1 (not in place: the top is a view).
// Runs on the CPU and the GPU alike: nothing moves on either.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ReshapeLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Reshape"; }
  // Backward reads no data (it a view).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  std::vector<TopView> TopViews(int num_tops) const override { return {{0, 0, true}}; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  std::vector<int> copied_;    // positions in `shape` holding 0
  int inferred_ = -1;          // position in `shape` holding -1, or -1 for none
  long long fixed_count_ = 1;  // product of the positive dimensions of `shape`
};

}  // namespace crema
