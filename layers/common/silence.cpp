#include "layers/common/silence.hpp"

#include "core/math_functions.hpp"

namespace crema {

void SilenceLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) set(context(), bottom[i]->count(), 0.f, bottom[i]->mutable_diff_on(device()));
}

}  // namespace crema
