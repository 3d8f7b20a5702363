#include "layers/contrastive_loss.hpp"

#include <algorithm>
#include <cmath>

namespace crema {

void ContrastiveLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  margin_ = param_.contrastive_loss_param().margin();
  legacy_ = param_.contrastive_loss_param().legacy_version();
  CREMA_CHECK(std::isfinite(margin_)) << describe() << ": contrastive_loss_param.margin must be finite, not "
                                      << margin_;
  if (difference_ == nullptr) difference_ = AddInternalBlob("difference");
  if (param_.loss_weight_size() == 0) set_loss(0, 1.f);
}

void ContrastiveLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& a = *bottom[0];
  const Blob& b = *bottom[1];
  CREMA_CHECK(a.shape() == b.shape() && a.num_axes() >= 1)
      << describe() << ": the two bottoms of a pair must have the same shape with a batch axis, but they are "
      << a.shape_string() << " and " << b.shape_string();
  CREMA_CHECK(bottom[2]->count() == a.shape(0))
      << describe() << ": the similarity labels (shape " << bottom[2]->shape_string() << ") must hold one value per "
      << "pair, " << a.shape(0) << " for bottoms of shape " << a.shape_string();
  difference_->ReshapeLike(a);
  squared_distance_.assign(a.shape(0), 0.0);
  top[0]->Reshape({});
}

bool ContrastiveLossLayer::Similar(const Blob& labels, int index) const {
  const float y = labels.cpu_data()[index];
  CREMA_CHECK(y == 0.f || y == 1.f) << describe() << ": similarity label " << y << " at index " << index
                                    << " of the labels (shape " << labels.shape_string()
                                    << ") must be 1 (similar) or 0 (dissimilar)";
  return y == 1.f;
}

void ContrastiveLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int num = bottom[0]->shape(0);
  const int dim = bottom[0]->count(1);
  const float* a = bottom[0]->cpu_data();
  const float* b = bottom[1]->cpu_data();
  float* diff = difference_->mutable_cpu_data();
  double loss = 0;
  for (int n = 0; n < num; ++n) {
    double d2 = 0;
    for (int k = 0; k < dim; ++k) {
      const int i = n * dim + k;
      diff[i] = a[i] - b[i];
      d2 += static_cast<double>(diff[i]) * diff[i];
    }
    squared_distance_[n] = d2;
    if (Similar(*bottom[2], n)) {
      loss += d2;
    } else if (legacy_) {
      loss += std::max(margin_ - d2, 0.0);
    } else {
      const double gap = std::max(margin_ - std::sqrt(d2), 0.0);
      loss += gap * gap;
    }
  }
  top[0]->mutable_cpu_data()[0] = num > 0 ? static_cast<float>(loss / num / 2.0) : 0.f;
}

void ContrastiveLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[2]) << describe() << ": cannot backpropagate to the similarity labels (bottom 2); "
                                  << "set propagate_down: false for it";
  const int num = bottom[0]->shape(0);
  if (num == 0) return;
  const int dim = bottom[0]->count(1);
  const float* diff = difference_->cpu_data();
  for (int side = 0; side < 2; ++side) {
    if (!propagate_down[side]) continue;
    // d loss / d a = coefficient * (a - b); the same with the opposite sign for b.
    const double alpha = (side == 0 ? 1.0 : -1.0) * top[0]->cpu_diff()[0] / num;
    float* dx = bottom[side]->mutable_cpu_diff();
    for (int n = 0; n < num; ++n) {
      double coefficient = 0;
      if (Similar(*bottom[2], n)) {
        coefficient = alpha;
      } else if (legacy_) {
        coefficient = margin_ - squared_distance_[n] > 0 ? -alpha : 0.0;
      } else {
        const double d = std::sqrt(squared_distance_[n]);
        const double gap = margin_ - d;
        coefficient = gap > 0 ? -alpha * gap / (d + 1e-4) : 0.0;
      }
      for (int k = 0; k < dim; ++k) dx[n * dim + k] = static_cast<float>(coefficient * diff[n * dim + k]);
    }
  }
}

}  // namespace crema
