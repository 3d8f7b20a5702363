#include "layers/recurrent/lstm_unit.hpp"

#include <string>

#include "core/elementwise.hpp"

namespace crema {

void LSTMUnitLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  CREMA_CHECK(params_.empty()) << describe() << ": LSTMUnit has no learned parameters, but " << params_.size()
                              << " stored blob(s) came with it";
  gates_ = AddInternalBlob("gates");
}

void LSTMUnitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& c_prev = *bottom[0];
  const Blob& x = *bottom[1];
  const Blob& cont = *bottom[2];
  const std::string shapes =
      "c_prev " + c_prev.shape_string() + ", x " + x.shape_string() + ", cont " + cont.shape_string();
  CREMA_CHECK(c_prev.num_axes() == 3 && c_prev.shape(0) == 1)
      << describe() << ": c_prev must have shape (1, N, H), but the bottoms are " << shapes;
  num_ = c_prev.shape(1);
  hidden_ = c_prev.shape(2);
  CREMA_CHECK(x.num_axes() == 3 && x.shape(0) == 1 && x.shape(1) == num_ && x.shape(2) == 4 * hidden_)
      << describe() << ": x (the gate inputs i, f, o, g) must have shape (1, N, 4H) = (1, " << num_ << ", "
      << 4 * hidden_ << ") for c_prev (1, N, H), but the bottoms are " << shapes;
  CREMA_CHECK(cont.num_axes() == 2 && cont.shape(0) == 1 && cont.shape(1) == num_)
      << describe() << ": cont must have shape (1, N) = (1, " << num_ << "), but the bottoms are " << shapes;
  top[0]->ReshapeLike(c_prev);
  top[1]->ReshapeLike(c_prev);
  gates_->ReshapeLike(x);
}

void LSTMUnitLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  for_each_element(
      context(), num_ * hidden_,
      LSTMUnitForwardRule{bottom[0]->data_on(d), bottom[1]->data_on(d), bottom[2]->data_on(d),
                          gates_->mutable_data_on(d), top[0]->mutable_data_on(d), top[1]->mutable_data_on(d), hidden_});
}

void LSTMUnitLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  CREMA_CHECK(!propagate_down[2]) << describe() << ": cont (the sequence continuation flags) has no gradient; "
                                  << "set propagate_down: false for it";
  if (!propagate_down[0] && !propagate_down[1]) return;
  const Device d = device();
  for_each_element(
      context(), num_ * hidden_,
      LSTMUnitBackwardRule{bottom[0]->data_on(d), bottom[2]->data_on(d), gates_->data_on(d), top[0]->diff_on(d),
                           top[1]->diff_on(d), propagate_down[0] ? bottom[0]->mutable_diff_on(d) : nullptr,
                           propagate_down[1] ? bottom[1]->mutable_diff_on(d) : nullptr, hidden_});
}

}  // namespace crema
