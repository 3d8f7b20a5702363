#include "layers/silence.hpp"

#include <algorithm>

namespace crema {

void SilenceLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_cpu_diff();
    std::fill(dx, dx + bottom[i]->count(), 0.f);
  }
}

}  // namespace crema
