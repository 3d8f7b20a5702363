#include "layers/common/split.hpp"

#include "core/math_functions.hpp"

namespace crema {

std::vector<Layer::TopView> SplitLayer::TopViews(int num_tops) const {
  // Data only: each top's gradient is its own, summed into the bottom's in Backward. (Views also refuse in
  // place, where backward would overwrite the sum with one top's share.)
  std::vector<TopView> views;
  for (int t = 0; t < num_tops; ++t) views.push_back({t, 0, false});
  return views;
}

void SplitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (Blob* copy : top) copy->ReshapeLike(*bottom[0]);
}

void SplitLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Device d = device();
  float* dx = bottom[0]->mutable_diff_on(d);
  copy(context(), count, top[0]->diff_on(d), dx);
  for (size_t i = 1; i < top.size(); ++i) axpy(context(), count, 1.f, top[i]->diff_on(d), dx);
}

}  // namespace crema
