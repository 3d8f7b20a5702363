// LRN (local response normalisation): y = x * scale^-beta, where scale sums the squares of x over a
// neighbourhood of each value:
//   ACROSS_CHANNELS  scale(n, c, h, w) = k + alpha / local_size * sum of x(n, c', h, w)^2 over the local_size
//                    channels c' centred on c (those outside [0, C) count as 0)
//   WITHIN_CHANNEL   scale(n, c, h, w) = 1 + alpha / local_size^2 * sum of x(n, c, h', w')^2 over the
//                    local_size x local_size window centred on (h, w), zero padded
//
// lrn_param: local_size (odd, default 5), alpha (default 1), beta (default 0.75), k (default 1; as in Caffe,
// WITHIN_CHANNEL ignores it and adds 1), norm_region (ACROSS_CHANNELS, WITHIN_CHANNEL), engine (one engine).
// Bottoms -> tops: 1 -> 1, a 4-d (N, C, H, W) bottom and a top of its shape. No blobs; the scale is kept from
// forward to backward in the internal blob `<layer>.scale`. Backward recomputes y from x and the scale, so a
// later in-place layer may overwrite the top; backward's
// dy * y / scale takes a workspace the size of the input.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class LRNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LRN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // Reads and checks lrn_param (LayerSetUp without the scale blob; other engines share it).
  void ReadParameters();
  // Checks the bottom's shape and records it.
  void ReadShape(const Blob& input);

 private:
  // Calls f(j) for the flat index j of every neighbour of the value at (n, c, h, w) (itself included).
  template <typename F>
  void ForEachNeighbour(int n, int c, int h, int w, F f) const;

 protected:
  int size_ = 5, pre_ = 2;
  float alpha_ = 1.f, beta_ = 0.75f, k_ = 1.f;
  bool across_ = true;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob* scale_ = nullptr;
};

}  // namespace crema
