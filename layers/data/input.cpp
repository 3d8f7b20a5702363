#include "layers/data/input.hpp"

namespace crema {

void InputLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const InputParameter& input_param = param_.input_param();
  const int num_shapes = input_param.shape_size();
  const int num_tops = static_cast<int>(top.size());
  CREMA_CHECK(num_shapes == 0 || num_shapes == 1 || num_shapes == num_tops)
      << describe() << ": input_param gives " << num_shapes << " shapes for " << num_tops
      << " tops; give one shape per top, or a single shape for all of them";
  // Without shapes the tops keep theirs; a net's fresh top has none yet (no axes), and the next layer would be
  // blamed for the scalar it then reads.
  for (int i = 0; i < num_tops && num_shapes == 0; ++i) {
    CREMA_CHECK(top[i]->num_axes() > 0)
        << describe() << ": input_param gives no shape for top '"
        << (i < param_.top_size() ? param_.top(i) : std::to_string(i))
        << "'; give one, e.g. input_param { shape { dim: 1 dim: 3 dim: 224 dim: 224 } }";
  }
  for (int i = 0; i < num_tops && num_shapes > 0; ++i) {
    const int index = num_shapes == 1 ? 0 : i;
    try {
      top[i]->Reshape(ShapeFromProto(input_param.shape(index)));
    } catch (const Error& error) {
      CREMA_FAIL() << describe() << ": input_param.shape " << index << ": " << error.what();
    }
  }
}

}  // namespace crema
