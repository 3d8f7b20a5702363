#include "layers/common/tile.hpp"

#include <algorithm>

#include "core/elementwise.hpp"

namespace crema {

void TileLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const TileParameter& p = param_.tile_param();
  CREMA_CHECK(p.has_tiles()) << describe() << ": tile_param.tiles is required";
  CREMA_CHECK(p.tiles() >= 1) << describe() << ": tile_param.tiles is " << p.tiles() << "; it must be at least 1";
}

void TileLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const TileParameter& p = param_.tile_param();
  const int axis = CanonicalAxis(*bottom[0], p.axis(), "tile_param.axis");
  std::vector<int> shape = bottom[0]->shape();
  CREMA_CHECK(static_cast<long long>(shape[axis]) * p.tiles() <= (1LL << 31) - 1)
      << describe() << ": tile_param.tiles " << p.tiles() << " makes axis " << axis << " of the bottom of shape "
      << bottom[0]->shape_string() << " too large";
  shape[axis] *= p.tiles();
  outer_ = bottom[0]->count(0, axis);
  inner_ = bottom[0]->count(axis);
  top[0]->Reshape(shape);
}

void TileLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int tiles = param_.tile_param().tiles();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < outer_; ++n) {
    const float* block = x + n * inner_;
    for (int t = 0; t < tiles; ++t) std::copy(block, block + inner_, y + (n * tiles + t) * inner_);
  }
}

void TileLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int tiles = param_.tile_param().tiles();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < outer_; ++n) {
    float* block = dx + n * inner_;
    const float* first = dy + n * tiles * inner_;
    std::copy(first, first + inner_, block);
    for (int t = 1; t < tiles; ++t) {
      const float* copy = first + t * inner_;
      for (int k = 0; k < inner_; ++k) block[k] += copy[k];
    }
  }
}

void TileLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(
      context(), top[0]->count(),
      TileForwardRule{bottom[0]->data_on(d), top[0]->mutable_data_on(d), inner_, param_.tile_param().tiles()});
}

void TileLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(
      context(), bottom[0]->count(),
      TileBackwardRule{top[0]->diff_on(d), bottom[0]->mutable_diff_on(d), inner_, param_.tile_param().tiles()});
}

}  // namespace crema
