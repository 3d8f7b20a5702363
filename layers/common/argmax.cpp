#include "layers/common/argmax.hpp"

#include <algorithm>
#include <utility>

namespace crema {

void ArgMaxLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ArgMaxParameter& p = param_.argmax_param();
  CREMA_CHECK(p.top_k() >= 1) << describe() << ": argmax_param.top_k is " << p.top_k() << "; it must be at least 1";
  top_k_ = static_cast<int>(p.top_k());
}

void ArgMaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ArgMaxParameter& p = param_.argmax_param();
  const Blob& x = *bottom[0];
  std::vector<int> shape;
  if (p.has_axis()) {
    axis_ = CanonicalAxis(x, p.axis(), "argmax_param.axis");
    compared_ = x.shape(axis_);
    inner_ = x.count(axis_ + 1);
    CREMA_CHECK(p.top_k() <= static_cast<unsigned>(compared_))
        << describe() << ": argmax_param.top_k " << p.top_k() << " is more than the " << compared_
        << " values along argmax_param.axis " << p.axis() << " of the bottom of shape " << x.shape_string();
    shape = x.shape();
    shape[axis_] = top_k_;
  } else {
    CREMA_CHECK(x.num_axes() >= 1) << describe() << ": without argmax_param.axis the bottom needs a first (item) "
                                   << "axis, but it is a scalar";
    axis_ = -1;
    compared_ = x.count(1);
    inner_ = 1;
    CREMA_CHECK(p.top_k() <= static_cast<unsigned>(compared_))
        << describe() << ": argmax_param.top_k " << p.top_k() << " is more than the " << compared_
        << " values of each item of the bottom of shape " << x.shape_string();
    shape.assign(std::max(3, x.num_axes()), 1);
    shape[0] = x.shape(0);
    shape[1] = p.out_max_val() ? 2 : 1;
    shape[2] = top_k_;
  }
  top[0]->Reshape(shape);
}

void ArgMaxLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const bool out_max_val = param_.argmax_param().out_max_val();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int searches = compared_ > 0 ? bottom[0]->count() / compared_ : 0;
  std::vector<std::pair<float, int>> candidates(compared_);
  const auto larger = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  };
  for (int s = 0; s < searches; ++s) {
    // Search s runs over the values at stride inner_ from this start.
    const int outer = s / inner_, position = s % inner_;
    const float* values = x + outer * compared_ * inner_ + position;
    for (int j = 0; j < compared_; ++j) candidates[j] = {values[j * inner_], j};
    std::partial_sort(candidates.begin(), candidates.begin() + top_k_, candidates.end(), larger);
    if (axis_ >= 0) {
      float* out = y + outer * top_k_ * inner_ + position;
      for (int k = 0; k < top_k_; ++k) {
        out[k * inner_] = out_max_val ? candidates[k].first : static_cast<float>(candidates[k].second);
      }
    } else {
      float* out = y + s * (out_max_val ? 2 : 1) * top_k_;
      for (int k = 0; k < top_k_; ++k) {
        out[k] = static_cast<float>(candidates[k].second);
        if (out_max_val) out[top_k_ + k] = candidates[k].first;
      }
    }
  }
}

void ArgMaxLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i) {
    CREMA_CHECK(!propagate_down[i]) << describe() << ": ArgMax has no gradient, so bottom " << i
                                    << " cannot be backpropagated; set propagate_down: false for it, or keep the "
                                    << "layer off the path to a loss";
  }
}

void ArgMaxLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int searches = compared_ > 0 ? bottom[0]->count() / compared_ : 0;
  for_each_element(context(), searches,
                   ArgMaxRule{bottom[0]->data_on(d), top[0]->mutable_data_on(d), compared_, inner_, top_k_, axis_ >= 0,
                              param_.argmax_param().out_max_val()});
}

void ArgMaxLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  Backward_cpu(top, propagate_down, bottom);  // only checks that no gradient is asked for
}

}  // namespace crema
