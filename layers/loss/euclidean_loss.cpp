#include "layers/loss/euclidean_loss.hpp"

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void EuclideanLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (difference_ == nullptr) difference_ = AddInternalBlob("difference", InternalLifetime::kUntilBackward);
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

void EuclideanLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int count = bottom[0]->count();
  float* diff = difference_->mutable_data_on(d);
  for_each_element(context(), count, EuclideanDifferenceRule{bottom[0]->data_on(d), bottom[1]->data_on(d), diff});
  const double sum = dot(context(), count, diff, diff);
  const int batch = bottom[0]->shape(0);
  set(context(), 1, batch > 0 ? static_cast<float>(sum / batch / 2.0) : 0.f, top[0]->mutable_data_on(d));
}

void EuclideanLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const int batch = bottom[0]->shape(0);
  if (batch == 0) return;
  const Device d = device();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    for_each_element(context(), bottom[i]->count(),
                     EuclideanGradientRule{difference_->data_on(d), top[0]->diff_on(d), i == 0 ? 1.f : -1.f,
                                           static_cast<float>(batch), bottom[i]->mutable_diff_on(d)});
  }
}

}  // namespace crema
