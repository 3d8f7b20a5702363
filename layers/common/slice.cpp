#include "layers/common/slice.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "layers/common/concat.hpp"

namespace crema {

void SliceLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const SliceParameter& p = param_.slice_param();
  const Blob& x = *bottom[0];
  if (p.has_slice_dim()) {
    CREMA_CHECK(!p.has_axis()) << describe() << ": give slice_param.axis or the deprecated slice_param.slice_dim, "
                               << "not both";
    CREMA_CHECK(static_cast<int>(p.slice_dim()) < x.num_axes())
        << describe() << ": slice_param.slice_dim " << p.slice_dim() << " is outside the bottom of shape "
        << x.shape_string();
    axis_ = static_cast<int>(p.slice_dim());
  } else {
    axis_ = CanonicalAxis(x, p.axis(), "slice_param.axis");
  }
  const int size = x.shape(axis_);
  const int tops = static_cast<int>(top.size());
  std::vector<int> sizes;
  if (p.slice_point_size() > 0) {
    CREMA_CHECK(p.slice_point_size() == tops - 1)
        << describe() << ": slice_param.slice_point has " << p.slice_point_size() << " point(s), but " << tops
        << " top(s) need " << tops - 1;
    int previous = 0;
    for (int i = 0; i < p.slice_point_size(); ++i) {
      const int point = static_cast<int>(p.slice_point(i));
      // The last point may be the axis' end, as in Caffe: the last top is then empty.
      const bool last = i + 1 == p.slice_point_size();
      CREMA_CHECK(point > previous && (point < size || (last && point == size)))
          << describe() << ": slice_param.slice_point " << i << " (" << p.slice_point(i) << ") must be above "
          << previous << " and below " << size << (last ? " (or equal to it, for an empty last top)" : "")
          << ", the size of axis " << axis_ << " of the bottom of shape " << x.shape_string();
      if (last && point == size && !warned_empty_top_) {
        warned_empty_top_ = true;
        const std::string name =
            param_.top_size() == tops ? "'" + param_.top(tops - 1) + "'" : std::to_string(tops - 1);
        LOG(WARNING) << describe() << ": the last slice_param.slice_point (" << point << ") is the end of axis "
                     << axis_ << " of the bottom of shape " << x.shape_string() << ": top " << name
                     << " is empty (size 0 along the axis), as Caffe does";
      }
      sizes.push_back(point - previous);
      previous = point;
    }
    sizes.push_back(size - previous);
  } else {
    CREMA_CHECK(size % tops == 0) << describe() << ": without slice_param.slice_point, axis " << axis_
                                  << " of the bottom of shape " << x.shape_string() << " (size " << size
                                  << ") must divide into " << tops << " equal part(s)";
    sizes.assign(tops, size / tops);
  }
  outer_ = x.count(0, axis_);
  inner_ = x.count(axis_ + 1);
  std::vector<int> shape = x.shape();
  for (int t = 0; t < tops; ++t) {
    shape[axis_] = sizes[t];
    top[t]->Reshape(shape);
  }
}

void SliceLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const int bottom_block = bottom[0]->shape(axis_) * inner_;
  int start = 0;
  for (Blob* t : top) {
    const int block = t->shape(axis_) * inner_;
    float* y = t->mutable_cpu_data();
    for (int n = 0; n < outer_; ++n) {
      const float* from = x + n * bottom_block + start;
      std::copy(from, from + block, y + n * block);
    }
    start += block;
  }
}

void SliceLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  const int bottom_block = bottom[0]->shape(axis_) * inner_;
  int start = 0;
  for (const Blob* t : top) {
    const int block = t->shape(axis_) * inner_;
    const float* dy = t->cpu_diff();
    for (int n = 0; n < outer_; ++n) std::copy(dy + n * block, dy + (n + 1) * block, dx + n * bottom_block + start);
    start += block;
  }
}

void SliceLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  std::vector<float*> parts;
  std::vector<int> sizes;
  for (Blob* t : top) {
    parts.push_back(t->mutable_data_on(d));
    sizes.push_back(t->shape(axis_));
  }
  CutAlongAxis(context(), bottom[0]->data_on(d), parts, sizes, outer_, inner_);
}

void SliceLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  std::vector<const float*> parts;
  std::vector<int> sizes;
  for (const Blob* t : top) {
    parts.push_back(t->diff_on(d));
    sizes.push_back(t->shape(axis_));
  }
  JoinAlongAxis(context(), parts, sizes, outer_, inner_, bottom[0]->mutable_diff_on(d));
}

}  // namespace crema
