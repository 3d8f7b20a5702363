#include "layers/common/split.hpp"

#include <algorithm>

#include "core/math_functions.hpp"
#include "core/threads.hpp"

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
  if (d == Device::kCPU && top.size() > 1) {
    // One pass over the gradients, in stretches that stay in the L1 cache, split over the threads: the sum
    // ((top 0 + top 1) + top 2) ..., as the copy and additions below give it, in a third of their memory traffic
    // for two tops (ResNet-50's shortcuts) and on every thread (one did the copy and the additions).
    std::vector<const float*> diffs;
    for (const Blob* t : top) diffs.push_back(t->cpu_diff());
    constexpr int kStretch = 4096;
    const int stretches = (count + kStretch - 1) / kStretch;
#pragma omp parallel for schedule(static) if (count >= ParallelElementThreshold())
    for (int s = 0; s < stretches; ++s) {
      const int first = s * kStretch, length = std::min(kStretch, count - first);
      float* sum = dx + first;
      const float* a = diffs[0] + first;
      const float* b = diffs[1] + first;
      for (int i = 0; i < length; ++i) sum[i] = a[i] + b[i];
      for (size_t t = 2; t < diffs.size(); ++t) {
        const float* c = diffs[t] + first;
        for (int i = 0; i < length; ++i) sum[i] += c[i];
      }
    }
    return;
  }
  copy(context(), count, top[0]->diff_on(d), dx);
  for (size_t i = 1; i < top.size(); ++i) axpy(context(), count, 1.f, top[i]->diff_on(d), dx);
}

}  // namespace crema
