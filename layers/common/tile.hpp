// Tile: repeats the bottom `tiles` times along one axis. Seen as outer x inner around the axis (inner = the
// axis and everything after it), each of the outer blocks of the bottom is written `tiles` times in a row,
// so the top's size along the axis is tiles times the bottom's. Backward sums the gradients of the copies.
//
// Params (tile_param): axis (default 1; negative counts from the end), tiles (required, at least 1).
// Bottoms -> tops: 1 -> 1.
// Runs on the CPU (block copies) and the GPU (the rules below; tile.cu compiles them).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One value of the top per call: the copy it is of.
struct TileForwardRule {
  const float* x;
  float* y;
  int inner, tiles;
  CREMA_HOST_DEVICE void operator()(int i) const {
    y[i] = x[static_cast<long long>(i / (inner * tiles)) * inner + i % inner];
  }
};

// One value of the bottom's gradient per call, gathered from its copies in order (the CPU's order too).
struct TileBackwardRule {
  const float* dy;
  float* dx;
  int inner, tiles;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const float* copies = dy + static_cast<long long>(j / inner) * tiles * inner + j % inner;
    float total = copies[0];
    for (int t = 1; t < tiles; ++t) total += copies[static_cast<long long>(t) * inner];
    dx[j] = total;
  }
};

class TileLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Tile"; }
  // Backward reads no data (it sums the copies' gradients).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
  int outer_ = 1;  // product of the axes before the tiled axis
  int inner_ = 1;  // product of the tiled axis and those after it
};

}  // namespace crema
