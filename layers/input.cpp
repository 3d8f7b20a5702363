#include "layers/input.hpp"

#include <climits>

namespace crema {

void InputLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const InputParameter& input_param = param_.input_param();
  const int num_shapes = input_param.shape_size();
  const int num_tops = static_cast<int>(top.size());
  CREMA_CHECK(num_shapes == 0 || num_shapes == 1 || num_shapes == num_tops)
      << describe() << ": input_param gives " << num_shapes << " shapes for " << num_tops
      << " tops; give one shape per top, or a single shape for all of them";
  for (int i = 0; i < num_tops && num_shapes > 0; ++i) {
    const BlobShape& shape = input_param.shape(num_shapes == 1 ? 0 : i);
    std::vector<int> dims;
    for (int d = 0; d < shape.dim_size(); ++d) {
      CREMA_CHECK(shape.dim(d) >= 0 && shape.dim(d) <= INT_MAX)
          << describe() << ": input_param.shape " << (num_shapes == 1 ? 0 : i) << " has dimension " << d << " of size "
          << shape.dim(d) << ", which is out of range";
      dims.push_back(static_cast<int>(shape.dim(d)));
    }
    top[i]->Reshape(dims);
  }
}

}  // namespace crema
