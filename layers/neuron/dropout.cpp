#include "layers/neuron/dropout.hpp"

#include <glog/logging.h>

#include "core/math_functions.hpp"

namespace crema {

void DropoutLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ratio_ = param_.dropout_param().dropout_ratio();
  // Written so that NaN fails too; in training, a ratio of 1 would drop everything and divide by zero. Outside
  // training nothing is dropped, and Caffe runs a net of ratio 1 there: so does crema, saying so.
  CREMA_CHECK(ratio_ >= 0.f && (ratio_ < 1.f || (ratio_ == 1.f && phase() != TRAIN)))
      << describe() << ": dropout_param.dropout_ratio is " << ratio_ << ", but must lie in [0, 1)";
  if (ratio_ == 1.f)
    LOG(WARNING) << describe() << ": dropout_param.dropout_ratio is 1, which drops everything in training; in "
                 << Phase_Name(phase()) << " the layer " << (param_.dropout_param().scale_train() ? "copies" : "zeroes")
                 << " its input, as Caffe's does";
  const bool scale_train = param_.dropout_param().scale_train();
  scale_ = scale_train ? 1.f / (1.f - ratio_) : 1.f;
  test_scale_ = scale_train ? 1.f : 1.f - ratio_;
  if (phase() == TRAIN && mask_ == nullptr) mask_ = AddInternalBlob("mask", InternalLifetime::kUntilBackward);
}

void DropoutLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  if (mask_ != nullptr) mask_->ReshapeLike(*bottom[0]);
}

void DropoutLayer::ForwardElements(const Blob& bottom, Blob* top) {
  const Device d = device();
  const int count = bottom.count();
  if (phase() != TRAIN) {
    copy(context(), count, bottom.data_on(d), top->mutable_data_on(d));
    if (test_scale_ != 1.f) scale(context(), count, test_scale_, top->mutable_data_on(d));
    return;
  }
  RandomStream* random = this->random();
  const uint64_t key = static_cast<uint64_t>(random->NextUint32()) << 32 | random->NextUint32();
  for_each_element(context(), count, DropoutMaskRule{key, 1.f - ratio_, mask_->mutable_data_on(d)});
  for_each_element(context(), count,
                   DropoutApply{bottom.data_on(d), mask_->data_on(d), top->mutable_data_on(d), scale_});
}

void DropoutLayer::BackwardElements(const Blob& top, Blob* bottom) {
  const Device d = device();
  const int count = bottom->count();
  if (phase() != TRAIN) {
    copy(context(), count, top.diff_on(d), bottom->mutable_diff_on(d));
    if (test_scale_ != 1.f) scale(context(), count, test_scale_, bottom->mutable_diff_on(d));
    return;
  }
  for_each_element(context(), count,
                   DropoutApply{top.diff_on(d), mask_->data_on(d), bottom->mutable_diff_on(d), scale_});
}

}  // namespace crema
