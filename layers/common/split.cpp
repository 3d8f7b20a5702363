#include "layers/common/split.hpp"

#include <algorithm>

#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// A stretch of the bf16 sum: the copies' gradients added in order ((top 0 + top 1) + top 2) ... in floats, as the
// float sum adds them, each sum rounded once.
CREMA_VECTOR_CLONES void SumStretchRounded(const float* const* diffs, int tops, int first, int length, uint16_t* out) {
  float sum[4096];
  const float* a = diffs[0] + first;
  if (tops == 1) {
    for (int i = 0; i < length; ++i) sum[i] = a[i];
  } else {
    const float* b = diffs[1] + first;
    for (int i = 0; i < length; ++i) sum[i] = a[i] + b[i];
  }
  for (int t = 2; t < tops; ++t) {
    const float* c = diffs[t] + first;
    for (int i = 0; i < length; ++i) sum[i] += c[i];
  }
  uint16_t* o = out + first;
  for (int i = 0; i < length; ++i) o[i] = StoredAs(sum[i], o);
}

}  // namespace

void SplitLayer::SumInBfloat16(const std::vector<Blob*>& top, Blob* bottom) const {
  std::vector<const float*> diffs;
  for (const Blob* t : top) diffs.push_back(t->cpu_diff());
  auto* out = static_cast<uint16_t*>(bottom->mutable_cpu_diff_bytes());
  const int count = bottom->count();
  constexpr int kStretch = 4096;
  const int stretches = (count + kStretch - 1) / kStretch;
  const int tops = static_cast<int>(diffs.size());
#pragma omp parallel for schedule(static) if (count >= ParallelElementThreshold())
  for (int s = 0; s < stretches; ++s)
    SumStretchRounded(diffs.data(), tops, s * kStretch, std::min(kStretch, count - s * kStretch), out);
}

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
  if (bottom[0]->diff_type() == ElementType::kBfloat16) return SumInBfloat16(top, bottom[0]);
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
