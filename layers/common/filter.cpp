#include "layers/common/filter.hpp"

#include <algorithm>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void FilterLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  num_bottoms_ = static_cast<int>(bottom.size());
  CREMA_CHECK(top.size() + 1 == bottom.size())
      << describe() << ": needs one top per data bottom (the last bottom is the selector), but has " << bottom.size()
      << " bottoms and " << top.size() << " tops";
}

void FilterLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& selector = *bottom.back();
  const int items = selector.count();
  for (size_t i = 0; i + 1 < bottom.size(); ++i) {
    CREMA_CHECK(bottom[i]->num_axes() >= 1 && bottom[i]->shape(0) == items)
        << describe() << ": bottom " << i << " (shape " << bottom[i]->shape_string() << ") must have one item per "
        << "selector value, but the selector (shape " << selector.shape_string() << ") has " << items;
  }
  kept_.clear();
  const float* select = selector.cpu_data();
  for (int n = 0; n < items; ++n)
    if (select[n] != 0.f) kept_.push_back(n);
  for (size_t i = 0; i < top.size(); ++i) {
    std::vector<int> shape = bottom[i]->shape();
    shape[0] = static_cast<int>(kept_.size());
    top[i]->Reshape(shape);
  }
}

void FilterLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    const int item = bottom[i]->count(1);
    for (size_t k = 0; k < kept_.size(); ++k)
      cpu_copy(item, bottom[i]->cpu_data() + static_cast<size_t>(kept_[k]) * item,
               top[i]->mutable_cpu_data() + k * item);
  }
}

void FilterLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down.back()) << describe() << ": the selector (last bottom) has no gradient";
  for (size_t i = 0; i < top.size(); ++i) {
    if (!propagate_down[i]) continue;
    const int item = bottom[i]->count(1);
    float* diff = bottom[i]->mutable_cpu_diff();
    cpu_set(bottom[i]->count(), 0.f, diff);
    for (size_t k = 0; k < kept_.size(); ++k)
      cpu_copy(item, top[i]->cpu_diff() + k * item, diff + static_cast<size_t>(kept_[k]) * item);
  }
}

void FilterLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int items = bottom.back()->count(), kept = static_cast<int>(kept_.size());
  CREMA_CHECK(items < (1 << 24)) << describe() << ": on the GPU the selector may hold fewer than 2^24 items, but it "
                                 << "has " << items;
  kept_items_.Reshape({kept});
  places_.Reshape({items});
  float* kept_items = kept_items_.mutable_cpu_data();
  float* places = places_.mutable_cpu_data();
  std::fill(places, places + items, -1.f);
  for (int k = 0; k < kept; ++k) {
    kept_items[k] = static_cast<float>(kept_[k]);
    places[kept_[k]] = static_cast<float>(k);
  }
  const Device d = device();
  for (size_t i = 0; i < top.size(); ++i) {
    for_each_element(context(), top[i]->count(),
                     FilterForwardRule{bottom[i]->data_on(d), kept_items_.data_on(d), top[i]->mutable_data_on(d),
                                       bottom[i]->count(1)});
  }
}

void FilterLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down.back()) << describe() << ": the selector (last bottom) has no gradient";
  const Device d = device();
  for (size_t i = 0; i < top.size(); ++i) {
    if (!propagate_down[i]) continue;
    for_each_element(
        context(), bottom[i]->count(),
        FilterBackwardRule{top[i]->diff_on(d), places_.data_on(d), bottom[i]->mutable_diff_on(d), bottom[i]->count(1)});
  }
}

}  // namespace crema
