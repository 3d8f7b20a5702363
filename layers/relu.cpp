#include "layers/relu.hpp"

#include <algorithm>

#include "core/elementwise.hpp"

namespace crema {

void ReLULayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // In place, backward can only tell which side of zero an input was from the output, and y > 0 iff x > 0
  // holds only for a non-negative slope.
  CREMA_CHECK(bottom[0]->data() != top[0]->data() || param_.relu_param().negative_slope() >= 0.f)
      << describe() << ": relu_param.negative_slope " << param_.relu_param().negative_slope()
      << " is negative, which cannot run in place; give the layer a top of its own";
}

void ReLULayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ReshapeLike(*bottom[0]);
}

void ReLULayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float slope = param_.relu_param().negative_slope();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for_each_element(top[0]->count(), [=](int i) { y[i] = std::max(x[i], 0.f) + slope * std::min(x[i], 0.f); });
}

void ReLULayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float slope = param_.relu_param().negative_slope();
  // In place the input is gone, so the sign is read from the output (same sign, as the slope is then
  // non-negative; see LayerSetUp).
  const float* sign_source = bottom[0]->data() == top[0]->data() ? top[0]->cpu_data() : bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  for_each_element(bottom[0]->count(), [=](int i) { dx[i] = dy[i] * (sign_source[i] > 0.f ? 1.f : slope); });
}

}  // namespace crema
