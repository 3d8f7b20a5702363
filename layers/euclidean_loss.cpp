#include "layers/euclidean_loss.hpp"

#include "core/math_functions.hpp"

namespace crema {

void EuclideanLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (difference_ == nullptr) difference_ = AddInternalBlob("difference");
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void EuclideanLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& a = *bottom[0];
  const Blob& b = *bottom[1];
  CREMA_CHECK(a.num_axes() >= 1 && b.num_axes() >= 1 && a.shape(0) == b.shape(0) && a.count(1) == b.count(1))
      << describe() << ": the two bottoms must have the same first axis (the batch) and the same number of "
      << "values per item, but their shapes are " << a.shape_string() << " and " << b.shape_string();
  difference_->ReshapeLike(a);
  top[0]->Reshape({});
}

void EuclideanLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  const float* a = bottom[0]->cpu_data();
  const float* b = bottom[1]->cpu_data();
  float* diff = difference_->mutable_cpu_data();
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    diff[i] = a[i] - b[i];
    sum += static_cast<double>(diff[i]) * diff[i];
  }
  const int batch = bottom[0]->shape(0);
  top[0]->mutable_cpu_data()[0] = batch > 0 ? static_cast<float>(sum / batch / 2.0) : 0.f;
}

void EuclideanLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const int batch = bottom[0]->shape(0);
  if (batch == 0) return;
  const int count = bottom[0]->count();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float sign = i == 0 ? 1.f : -1.f;
    const float alpha = sign * top[0]->cpu_diff()[0] / static_cast<float>(batch);
    float* dx = bottom[i]->mutable_cpu_diff();
    cpu_copy(count, difference_->cpu_data(), dx);
    cpu_scale(count, alpha, dx);
  }
}

}  // namespace crema
