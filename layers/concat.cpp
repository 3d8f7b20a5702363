#include "layers/concat.hpp"

#include <algorithm>

namespace crema {

void ConcatLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ConcatParameter& p = param_.concat_param();
  const Blob& first = *bottom[0];
  if (p.has_concat_dim()) {
    CREMA_CHECK(!p.has_axis()) << describe() << ": give concat_param.axis or the deprecated concat_param.concat_dim, "
                               << "not both";
    CREMA_CHECK(static_cast<int>(p.concat_dim()) < first.num_axes())
        << describe() << ": concat_param.concat_dim " << p.concat_dim() << " is outside bottom 0 of shape "
        << first.shape_string();
    axis_ = static_cast<int>(p.concat_dim());
  } else {
    axis_ = CanonicalAxis(first, p.axis(), "concat_param.axis");
  }
  std::vector<int> top_shape = first.shape();
  for (size_t b = 1; b < bottom.size(); ++b) {
    const Blob& other = *bottom[b];
    bool same = other.num_axes() == first.num_axes();
    for (int a = 0; same && a < first.num_axes(); ++a) same = a == axis_ || other.shape(a) == first.shape(a);
    CREMA_CHECK(same) << describe() << ": bottom " << b << " has shape " << other.shape_string()
                      << ", but bottom 0 has " << first.shape_string() << "; all axes but the concatenation axis "
                      << axis_ << " must match";
    top_shape[axis_] += other.shape(axis_);
  }
  outer_ = first.count(0, axis_);
  inner_ = first.count(axis_ + 1);
  top[0]->Reshape(top_shape);
}

void ConcatLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* y = top[0]->mutable_cpu_data();
  const int top_block = top[0]->shape(axis_) * inner_;
  int start = 0;  // where this bottom's part begins inside one top block
  for (const Blob* b : bottom) {
    const int block = b->shape(axis_) * inner_;
    const float* x = b->cpu_data();
    for (int n = 0; n < outer_; ++n) std::copy(x + n * block, x + (n + 1) * block, y + n * top_block + start);
    start += block;
  }
}

void ConcatLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const int top_block = top[0]->shape(axis_) * inner_;
  int start = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int block = bottom[i]->shape(axis_) * inner_;
    if (propagate_down[i]) {
      float* dx = bottom[i]->mutable_cpu_diff();
      for (int n = 0; n < outer_; ++n) {
        const float* from = dy + n * top_block + start;
        std::copy(from, from + block, dx + n * block);
      }
    }
    start += block;
  }
}

}  // namespace crema
