#include "layers/common/softmax.hpp"

#include "core/elementwise.hpp"

namespace crema {

void SoftmaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  split_ = SplitAtClassAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  top[0]->ReshapeLike(*bottom[0]);
}

void SoftmaxLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(context(), split_.outer * split_.inner,
                   SoftmaxForwardRule{bottom[0]->data_on(d), top[0]->mutable_data_on(d), split_.classes, split_.inner});
}

void SoftmaxLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(context(), split_.outer * split_.inner,
                   SoftmaxBackwardRule{top[0]->data_on(d), top[0]->diff_on(d), bottom[0]->mutable_diff_on(d),
                                       split_.classes, split_.inner});
}

}  // namespace crema
