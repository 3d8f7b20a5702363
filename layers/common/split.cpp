#include "layers/common/split.hpp"

#include <algorithm>

#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "core/vector_clones.hpp"
#ifdef CREMA_USE_ONEDNN
#include "layers/onednn_util.hpp"
#endif

namespace crema {

namespace {

constexpr int kStretch = 4096;  // values summed at a time, in the L1 cache

// A stretch of one copy's gradient into the sum (the first copy sets it): floats as they lie or rounded to bf16 (the
// bf16 rule), or bf16 values.
CREMA_VECTOR_CLONES void AddStretch(const float* g, bool rounded, bool first, int length, float* sum) {
  if (rounded) {
    if (first) {
      for (int i = 0; i < length; ++i) sum[i] = Bfloat16ValueOf(g[i]);
    } else {
      for (int i = 0; i < length; ++i) sum[i] += Bfloat16ValueOf(g[i]);
    }
  } else {
    if (first) {
      for (int i = 0; i < length; ++i) sum[i] = g[i];
    } else {
      for (int i = 0; i < length; ++i) sum[i] += g[i];
    }
  }
}
CREMA_VECTOR_CLONES void AddStretch(const uint16_t* g, bool, bool first, int length, float* sum) {
  if (first) {
    for (int i = 0; i < length; ++i) sum[i] = ValueOf(g[i]);
  } else {
    for (int i = 0; i < length; ++i) sum[i] += ValueOf(g[i]);
  }
}
// Two copies' gradients in bf16 into a bf16 sum (a ResNet unit's output in bf16 training), in one loop.
CREMA_VECTOR_CLONES void SumTwoBfloat16(const uint16_t* __restrict a, const uint16_t* __restrict b,
                                        uint16_t* __restrict out, int length) {
  for (int i = 0; i < length; ++i) out[i] = StoredAs(ValueOf(a[i]) + ValueOf(b[i]), out);
}
// The sum into the bottom's gradient, floats or rounded to bf16.
CREMA_VECTOR_CLONES void StoreStretch(const float* sum, int length, float* out) {
  for (int i = 0; i < length; ++i) out[i] = sum[i];
}
CREMA_VECTOR_CLONES void StoreStretch(const float* sum, int length, uint16_t* out) {
  for (int i = 0; i < length; ++i) out[i] = StoredAs(sum[i], out);
}

}  // namespace

void SplitLayer::RoundCopyGradients(const std::vector<bool>& rounded) {
  rounded_.assign(rounded.size(), false);
#ifdef CREMA_USE_ONEDNN
  if (!RunsGpuCode() && requested_precision() == Precision::kBfloat16 && onednn::HasBfloat16Kernels())
    rounded_ = rounded;
#endif
}

bool SplitLayer::ReadsTopDiffInBfloat16(int top, const std::vector<bool>&) const {
  return top < static_cast<int>(rounded_.size()) && rounded_[top];
}

void SplitLayer::SumByTheBfloat16Rule(const std::vector<Blob*>& top, Blob* bottom) const {
  const int count = bottom->count();
  const int stretches = (count + kStretch - 1) / kStretch;
  const bool bf16_sum = bottom->diff_type() == ElementType::kBfloat16;
  void* out = bf16_sum ? bottom->mutable_cpu_diff_bytes() : static_cast<void*>(bottom->mutable_cpu_diff());
  if (bf16_sum && top.size() == 2 && top[0]->diff_type() == ElementType::kBfloat16 &&
      top[1]->diff_type() == ElementType::kBfloat16) {
    const auto* a = static_cast<const uint16_t*>(top[0]->cpu_diff_bytes());
    const auto* b = static_cast<const uint16_t*>(top[1]->cpu_diff_bytes());
#pragma omp parallel for schedule(static) if (count >= ParallelElementThreshold())
    for (int s = 0; s < stretches; ++s) {
      const int first = s * kStretch;
      SumTwoBfloat16(a + first, b + first, static_cast<uint16_t*>(out) + first, std::min(kStretch, count - first));
    }
    return;
  }
#pragma omp parallel for schedule(static) if (count >= ParallelElementThreshold())
  for (int s = 0; s < stretches; ++s) {
    const int first = s * kStretch, length = std::min(kStretch, count - first);
    float sum[kStretch];
    for (size_t t = 0; t < top.size(); ++t) {
      const bool rounded = t < rounded_.size() && rounded_[t];
      if (top[t]->diff_type() == ElementType::kBfloat16) {
        AddStretch(static_cast<const uint16_t*>(top[t]->cpu_diff_bytes()) + first, rounded, t == 0, length, sum);
      } else {
        AddStretch(top[t]->cpu_diff() + first, rounded, t == 0, length, sum);
      }
    }
    if (bf16_sum) {
      StoreStretch(sum, length, static_cast<uint16_t*>(out) + first);
    } else {
      StoreStretch(sum, length, static_cast<float*>(out) + first);
    }
  }
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
  // The bf16 rule, or a gradient in bf16 (on the CPU only).
  if (bottom[0]->diff_type() == ElementType::kBfloat16 ||
      std::find(rounded_.begin(), rounded_.end(), true) != rounded_.end())
    return SumByTheBfloat16Rule(top, bottom[0]);
  float* dx = bottom[0]->mutable_diff_on(d);
  if (d == Device::kCPU && top.size() > 1) {
    // One pass over the gradients, in stretches that stay in the L1 cache, split over the threads: the sum
    // ((top 0 + top 1) + top 2) ..., as the copy and additions below give it, in a third of their memory traffic
    // for two tops (ResNet-50's shortcuts) and on every thread (one did the copy and the additions).
    std::vector<const float*> diffs;
    for (const Blob* t : top) diffs.push_back(t->cpu_diff());
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
