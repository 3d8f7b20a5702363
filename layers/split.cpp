#include "layers/split.hpp"

#include "core/math_functions.hpp"

namespace crema {

void SplitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    // In place, backward would overwrite the summed gradient with one top's share of it.
    CREMA_CHECK(top[i] != bottom[0]) << describe() << " cannot run in place (top " << i
                                     << " is its bottom); give each top a name of its own";
    top[i]->ReshapeLike(*bottom[0]);
    top[i]->ShareData(*bottom[0]);
  }
}

void SplitLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  float* dx = bottom[0]->mutable_cpu_diff();
  cpu_copy(count, top[0]->cpu_diff(), dx);
  for (size_t i = 1; i < top.size(); ++i) cpu_axpy(count, 1.f, top[i]->cpu_diff(), dx);
}

}  // namespace crema
