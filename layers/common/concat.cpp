#include "layers/common/concat.hpp"

#include <algorithm>
#include <cstdint>

namespace crema {

namespace {

// Calls run(group, index of its first part) for each group of up to kMaxParts consecutive parts.
template <typename Run>
void ForEachGroupOfParts(const std::vector<int>& sizes, int inner, const Run& run) {
  int whole_size = 0;
  for (int size : sizes) whole_size += size;
  int offset = 0;
  for (size_t first = 0; first < sizes.size(); first += kMaxParts) {
    AxisPartsGroup group{};
    group.whole_block = whole_size * inner;
    group.offset = offset;
    group.parts = static_cast<int>(std::min(sizes.size() - first, static_cast<size_t>(kMaxParts)));
    for (int p = 0; p < group.parts; ++p) group.start[p + 1] = group.start[p] + sizes[first + p] * inner;
    group.span = group.start[group.parts];
    run(group, first);
    offset += group.span;
  }
}

}  // namespace

template <typename T>
void JoinAlongAxis(Context& context, const std::vector<const T*>& parts, const std::vector<int>& sizes, int outer,
                   int inner, T* whole) {
  ForEachGroupOfParts(sizes, inner, [&](const AxisPartsGroup& group, size_t first) {
    JoinPartsRule<T> rule{group, {}, whole};
    for (int p = 0; p < group.parts; ++p) rule.part[p] = parts[first + p];
    for_each_element(context, outer * group.span, rule);
  });
}

template void JoinAlongAxis(Context&, const std::vector<const float*>&, const std::vector<int>&, int, int, float*);
template void JoinAlongAxis(Context&, const std::vector<const uint16_t*>&, const std::vector<int>&, int, int,
                            uint16_t*);

void CutAlongAxis(Context& context, const float* whole, const std::vector<float*>& parts, const std::vector<int>& sizes,
                  int outer, int inner) {
  ForEachGroupOfParts(sizes, inner, [&](const AxisPartsGroup& group, size_t first) {
    CutPartsRule rule{group, whole, {}};
    bool wanted = false;
    for (int p = 0; p < group.parts; ++p) {
      rule.part[p] = parts[first + p];
      wanted = wanted || parts[first + p] != nullptr;
    }
    if (wanted) for_each_element(context, outer * group.span, rule);
  });
}

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
  for (const Blob* b : bottom)
    CREMA_CHECK(b->quantization() == top[0]->quantization() &&
                (b->quantization().floats() || PassesQuantizationThrough()))
        << describe() << ": its bottoms and top were planned in different element types";
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

void ConcatLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  std::vector<int> sizes;
  for (const Blob* b : bottom) sizes.push_back(b->shape(axis_));
  if (IsHalfType(top[0]->data_type())) {  // 16-bit values, copied as they lie
    std::vector<const uint16_t*> parts;
    for (const Blob* b : bottom) parts.push_back(static_cast<const uint16_t*>(b->bytes_on(d)));
    JoinAlongAxis(context(), parts, sizes, outer_, inner_, static_cast<uint16_t*>(top[0]->mutable_bytes_on(d)));
    return;
  }
  std::vector<const float*> parts;
  for (const Blob* b : bottom) parts.push_back(b->data_on(d));
  JoinAlongAxis(context(), parts, sizes, outer_, inner_, top[0]->mutable_data_on(d));
}

void ConcatLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const Device d = device();
  std::vector<float*> parts;
  std::vector<int> sizes;
  for (size_t i = 0; i < bottom.size(); ++i) {
    parts.push_back(propagate_down[i] ? bottom[i]->mutable_diff_on(d) : nullptr);
    sizes.push_back(bottom[i]->shape(axis_));
  }
  CutAlongAxis(context(), top[0]->diff_on(d), parts, sizes, outer_, inner_);
}

}  // namespace crema
