#include "layers/dropout.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void DropoutLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ratio_ = param_.dropout_param().dropout_ratio();
  // Written so that NaN fails too; a ratio of 1 would drop everything and divide by zero.
  CREMA_CHECK(ratio_ >= 0.f && ratio_ < 1.f)
      << describe() << ": dropout_param.dropout_ratio is " << ratio_ << ", but must lie in [0, 1)";
  scale_ = 1.f / (1.f - ratio_);
}

void DropoutLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ReshapeLike(*bottom[0]);
  mask_.resize(bottom[0]->count());
}

void DropoutLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  if (phase() != TRAIN) {
    if (x != y) cpu_copy(count, x, y);
    return;
  }
  // Drawn serially: the order of draws is what makes the mask reproducible.
  RandomStream* random = this->random();
  const float keep = 1.f - ratio_;
  for (int i = 0; i < count; ++i) mask_[i] = random->Bernoulli(keep) ? 1u : 0u;
  const unsigned* mask = mask_.data();
  const float scale = scale_;
  for_each_element(count, [=](int i) { y[i] = x[i] * static_cast<float>(mask[i]) * scale; });
}

void DropoutLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  if (phase() != TRAIN) {
    if (dx != dy) cpu_copy(count, dy, dx);
    return;
  }
  const unsigned* mask = mask_.data();
  const float scale = scale_;
  for_each_element(count, [=](int i) { dx[i] = dy[i] * static_cast<float>(mask[i]) * scale; });
}

}  // namespace crema
