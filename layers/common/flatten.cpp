#include "layers/common/flatten.hpp"

#include <glog/logging.h>

namespace crema {

void FlattenLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const FlattenParameter& flatten_param = param_.flatten_param();
  const std::vector<int>& shape = bottom[0]->shape();
  const int start = CanonicalAxis(*bottom[0], flatten_param.axis(), "flatten_param.axis");
  const int end = CanonicalAxis(*bottom[0], flatten_param.end_axis(), "flatten_param.end_axis");
  CREMA_CHECK(start <= end + 1) << describe() << ": flatten_param.end_axis (" << flatten_param.end_axis()
                                << ", axis " << end << ") comes before flatten_param.axis (" << flatten_param.axis()
                                << ", axis " << start << ") for the bottom of shape " << bottom[0]->shape_string();
  if (start == end + 1 && !warned_inserted_axis_) {
    warned_inserted_axis_ = true;
    LOG(WARNING) << describe() << ": flatten_param.end_axis (" << flatten_param.end_axis() << ", axis " << end
                 << ") is just before flatten_param.axis (" << flatten_param.axis() << ", axis " << start
                 << "): nothing is flattened and a size-1 axis is inserted at axis " << start << ", as Caffe does";
  }
  std::vector<int> top_shape(shape.begin(), shape.begin() + start);
  top_shape.push_back(bottom[0]->count(start, end + 1));
  top_shape.insert(top_shape.end(), shape.begin() + end + 1, shape.end());
  top[0]->Reshape(top_shape);
}

}  // namespace crema
