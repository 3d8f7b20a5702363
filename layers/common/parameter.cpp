#include "layers/common/parameter.hpp"

#include "core/math_functions.hpp"

namespace crema {

void ParameterLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  CREMA_CHECK(param_.parameter_param().has_shape()) << describe() << ": parameter_param.shape must be given";
  std::vector<int> shape;
  try {
    shape = ShapeFromProto(param_.parameter_param().shape());
  } catch (const Error& error) {
    CREMA_FAIL() << describe() << ": parameter_param.shape: " << error.what();
  }
  if (!params_.empty()) {
    AdoptStoredParameters({shape}, {"parameter"});
    return;
  }
  params_.push_back(std::make_shared<Blob>(shape));
  params_[0]->set_data(0.f);
}

void ParameterLayer::Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  top[0]->ReshapeLike(*params_[0]);
}

void ParameterLayer::Forward_any(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  copy(context(), top[0]->count(), params_[0]->data_on(device()), top[0]->mutable_data_on(device()));
}

void ParameterLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>&, const std::vector<Blob*>&) {
  if (param_propagate_down(0))
    axpy(context(), top[0]->count(), 1.f, top[0]->diff_on(device()), params_[0]->mutable_diff_on(device()));
}

}  // namespace crema
