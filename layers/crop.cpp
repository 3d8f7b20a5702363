#include "layers/crop.hpp"

#include <algorithm>
#include <string>

namespace crema {

void CropLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const CropParameter& param = param_.crop_param();
  const std::string me = describe();
  const Blob& data = *bottom[0];
  const Blob& reference = *bottom[1];
  const int axis = CanonicalAxis(data, param.axis(), "crop_param.axis");
  CREMA_CHECK(data.num_axes() == reference.num_axes())
      << me << ": the data (shape " << data.shape_string() << ") and the reference (shape " << reference.shape_string()
      << ") must have the same number of axes";
  const int cropped = data.num_axes() - axis;
  CREMA_CHECK(param.offset_size() <= 1 || param.offset_size() == cropped)
      << me << ": crop_param.offset is given " << param.offset_size() << " times, but crop_param.axis " << axis
      << " crops " << cropped << " axes of the data (shape " << data.shape_string()
      << "); give none, one for all, or one per cropped axis";
  offsets_.assign(data.num_axes(), 0);
  std::vector<int> shape = data.shape();
  for (int i = axis; i < data.num_axes(); ++i) {
    const int offset = param.offset_size() == 0   ? 0
                       : param.offset_size() == 1 ? static_cast<int>(param.offset(0))
                                                  : static_cast<int>(param.offset(i - axis));
    CREMA_CHECK(offset >= 0 && static_cast<long long>(offset) + reference.shape(i) <= data.shape(i))
        << me << ": along axis " << i << ", crop_param.offset " << offset << " plus the reference's size "
        << reference.shape(i) << " passes the data's size " << data.shape(i) << " (data " << data.shape_string()
        << ", reference " << reference.shape_string() << ")";
    offsets_[i] = offset;
    shape[i] = reference.shape(i);
  }
  top[0]->Reshape(shape);
}

template <typename F>
void CropLayer::ForEachPair(const Blob& bottom, const Blob& top, F f) const {
  const int axes = top.num_axes();
  const int count = top.count();
  std::vector<int> index(axes, 0);
  for (int t = 0; t < count; ++t) {
    int b = 0;
    for (int i = 0; i < axes; ++i) b = b * bottom.shape(i) + index[i] + offsets_[i];
    f(t, b);
    for (int i = axes - 1; i >= 0; --i) {  // the next index, last axis fastest
      if (++index[i] < top.shape(i)) break;
      index[i] = 0;
    }
  }
}

void CropLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  ForEachPair(*bottom[0], *top[0], [&](int t, int b) { y[t] = x[b]; });
}

void CropLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  // The reference bottom gets no gradient: only its shape is used.
  if (!propagate_down[0]) return;
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  std::fill(dx, dx + bottom[0]->count(), 0.f);
  ForEachPair(*bottom[0], *top[0], [&](int t, int b) { dx[b] = dy[t]; });
}

}  // namespace crema
