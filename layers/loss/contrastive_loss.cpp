#include "layers/loss/contrastive_loss.hpp"

#include <glog/logging.h>

#include <cmath>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void ContrastiveLossLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  margin_ = param_.contrastive_loss_param().margin();
  legacy_ = param_.contrastive_loss_param().legacy_version();
  CREMA_CHECK(std::isfinite(margin_)) << describe() << ": contrastive_loss_param.margin must be finite, not "
                                      << margin_;
  if (difference_ == nullptr) difference_ = AddInternalBlob("difference", InternalLifetime::kUntilBackward);
  if (squared_distance_ == nullptr)
    squared_distance_ = AddInternalBlob("squared_distance", InternalLifetime::kUntilBackward);
  if (param_.propagate_down_size() > 2 && param_.propagate_down(2) && !warned_label_gradient_) {
    warned_label_gradient_ = true;
    LOG(WARNING) << describe() << ": propagate_down asks for a gradient to the similarity labels (bottom 2), which "
                 << "get none, as Caffe does";
  }
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
  squared_distance_->Reshape({a.shape(0)});
  top[0]->Reshape({});
  RequestWorkspace(static_cast<size_t>(a.count()) + a.shape(0));  // squared differences, then the pairs' terms
}

void ContrastiveLossLayer::CheckSimilarityLabels(const Blob& labels) {
  const float* y = labels.cpu_data();
  for (int index = 0; index < labels.count(); ++index) {
    // Only a value whose truncation fits an int reads as a label; written so that NaN does not.
    CREMA_CHECK(y[index] > -2147483648.f && y[index] < 2147483648.f)
        << describe() << ": similarity label " << y[index] << " at index " << index << " of the labels (shape "
        << labels.shape_string() << ") is not a number: it must be 1 (similar) or 0 (dissimilar)";
    if (y[index] != 0.f && y[index] != 1.f && !warned_label_) {
      warned_label_ = true;
      LOG(WARNING) << describe() << ": similarity label " << y[index] << " at index " << index << " of the labels "
                   << "is neither 0 nor 1; read as " << (LabelClass(y[index]) != 0 ? "similar" : "dissimilar")
                   << " (truncated toward zero, non-zero is similar), as Caffe does (said once for this layer)";
    }
  }
}

void ContrastiveLossLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // The labels are checked on the host, where a data layer wrote them.
  CheckSimilarityLabels(*bottom[2]);
  const Device d = device();
  const int num = bottom[0]->shape(0);
  const int dim = bottom[0]->count(1);
  const int count = bottom[0]->count();
  float* squares = workspace();
  float* terms = squares + count;
  for_each_element(context(), count,
                   ContrastiveDifferenceRule{bottom[0]->data_on(d), bottom[1]->data_on(d),
                                             difference_->mutable_data_on(d), squares});
  float* squared_distance = squared_distance_->mutable_data_on(d);
  if (dim > 0) {
    gemv(context(), Transpose::kNo, num, dim, 1.f, squares, context().ones(dim), 0.f, squared_distance);
  } else {
    set(context(), num, 0.f, squared_distance);
  }
  for_each_element(context(), num, ContrastiveTermRule{PairsOn(*bottom[2]), terms});
  const double loss = sum(context(), num, terms);
  set(context(), 1, num > 0 ? static_cast<float>(loss / num / 2.0) : 0.f, top[0]->mutable_data_on(d));
}

void ContrastiveLossLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  const Device d = device();
  if (propagate_down[2]) {
    if (!warned_label_gradient_) {
      warned_label_gradient_ = true;
      LOG(WARNING) << describe() << ": the similarity labels (bottom 2) get no gradient, as Caffe does (said once for "
                   << "this layer)";
    }
    set(context(), bottom[2]->count(), 0.f, bottom[2]->mutable_diff_on(d));
  }
  const int num = bottom[0]->shape(0);
  const int dim = bottom[0]->count(1);
  if (num == 0 || dim == 0) return;
  for (int side = 0; side < 2; ++side) {
    if (!propagate_down[side]) continue;
    for_each_element(context(), bottom[side]->count(),
                     ContrastiveGradientRule{PairsOn(*bottom[2]), difference_->data_on(d), top[0]->diff_on(d),
                                             side == 0 ? 1.f : -1.f, static_cast<float>(num), dim,
                                             bottom[side]->mutable_diff_on(d)});
  }
}

}  // namespace crema
