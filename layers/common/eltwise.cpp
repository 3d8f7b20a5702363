#include "layers/common/eltwise.hpp"

#include <algorithm>

namespace crema {

bool EltwiseLayer::ForwardIsSumOfTwo() const {
  const EltwiseParameter& p = param_.eltwise_param();
  if (p.operation() != EltwiseParameter::SUM || param_.bottom_size() != 2) return false;
  for (float coeff : p.coeff())
    if (coeff != 1.f) return false;
  return true;
}

void EltwiseLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const EltwiseParameter& p = param_.eltwise_param();
  op_ = p.operation();
  if (p.coeff_size() > 0) {
    CREMA_CHECK(p.coeff_size() == static_cast<int>(bottom.size()))
        << describe() << ": eltwise_param.coeff has " << p.coeff_size() << " value(s); give one per bottom ("
        << bottom.size() << ") or none";
    CREMA_CHECK(op_ != EltwiseParameter::PROD)
        << describe() << ": eltwise_param.coeff is only for operation SUM, but the operation is PROD";
  }
  coeffs_.assign(bottom.size(), 1.f);
  for (int i = 0; i < p.coeff_size(); ++i) coeffs_[i] = p.coeff(i);
  if (op_ == EltwiseParameter::MAX && argmax_ == nullptr)
    argmax_ = AddInternalBlob("argmax", InternalLifetime::kUntilBackward);
}

void EltwiseLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t i = 1; i < bottom.size(); ++i) {
    CREMA_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << describe() << ": bottom " << i << " has shape " << bottom[i]->shape_string() << ", but bottom 0 has "
        << bottom[0]->shape_string() << "; every bottom must have the same shape";
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (argmax_ != nullptr) argmax_->ReshapeLike(*bottom[0]);
}

void EltwiseLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = top[0]->count();
  float* y = top[0]->mutable_cpu_data();
  const float* x0 = bottom[0]->cpu_data();
  switch (op_) {
    case EltwiseParameter::SUM:
      for (int k = 0; k < count; ++k) y[k] = coeffs_[0] * x0[k];
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        const float c = coeffs_[i];
        for (int k = 0; k < count; ++k) y[k] += c * x[k];
      }
      break;
    case EltwiseParameter::PROD:
      for (int k = 0; k < count; ++k) y[k] = x0[k];
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        for (int k = 0; k < count; ++k) y[k] *= x[k];
      }
      break;
    case EltwiseParameter::MAX: {
      float* winner = argmax_->mutable_cpu_data();
      for (int k = 0; k < count; ++k) {
        y[k] = x0[k];
        winner[k] = 0.f;
      }
      for (size_t i = 1; i < bottom.size(); ++i) {
        const float* x = bottom[i]->cpu_data();
        for (int k = 0; k < count; ++k) {
          if (x[k] > y[k]) {  // strictly greater: a tie stays with the earlier bottom
            y[k] = x[k];
            winner[k] = static_cast<float>(i);
          }
        }
      }
      break;
    }
  }
}

void EltwiseLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  const int count = top[0]->count();
  const float* dy = top[0]->cpu_diff();
  const float* y = top[0]->cpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_cpu_diff();
    switch (op_) {
      case EltwiseParameter::SUM:
        for (int k = 0; k < count; ++k) dx[k] = coeffs_[i] * dy[k];
        break;
      case EltwiseParameter::PROD:
        if (param_.eltwise_param().stable_prod_grad()) {
          for (int k = 0; k < count; ++k) dx[k] = dy[k];
          for (size_t j = 0; j < bottom.size(); ++j) {
            if (j == i) continue;
            const float* x = bottom[j]->cpu_data();
            for (int k = 0; k < count; ++k) dx[k] *= x[k];
          }
        } else {
          const float* x = bottom[i]->cpu_data();
          for (int k = 0; k < count; ++k) dx[k] = dy[k] * y[k] / x[k];
        }
        break;
      case EltwiseParameter::MAX: {
        const float* winner = argmax_->cpu_data();
        const float me = static_cast<float>(i);
        for (int k = 0; k < count; ++k) dx[k] = winner[k] == me ? dy[k] : 0.f;
        break;
      }
    }
  }
}

void EltwiseLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int count = top[0]->count();
  const int bottoms = static_cast<int>(bottom.size());
  EltwiseForwardRule rule{};
  rule.op = op_;
  rule.y = top[0]->mutable_data_on(d);
  rule.winner = op_ == EltwiseParameter::MAX ? argmax_->mutable_data_on(d) : nullptr;
  for (int first = 0; first < bottoms; first += kEltwiseGroup) {
    rule.first = first;
    rule.onto = first > 0;
    rule.bottoms = std::min(kEltwiseGroup, bottoms - first);
    for (int b = 0; b < rule.bottoms; ++b) {
      rule.x[b] = bottom[first + b]->data_on(d);
      rule.coeff[b] = coeffs_[first + b];
    }
    for_each_element(context(), count, rule);
  }
}

void EltwiseLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  const Device d = device();
  const int count = top[0]->count();
  const float* dy = top[0]->diff_on(d);
  const bool stable_product = op_ == EltwiseParameter::PROD && param_.eltwise_param().stable_prod_grad();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_diff_on(d);
    if (!stable_product) {
      const bool product = op_ == EltwiseParameter::PROD, max = op_ == EltwiseParameter::MAX;
      for_each_element(
          context(), count,
          EltwiseBackwardRule{op_, coeffs_[i], static_cast<float>(i), dy, product ? top[0]->data_on(d) : nullptr,
                              product ? bottom[i]->data_on(d) : nullptr, max ? argmax_->data_on(d) : nullptr, dx});
      continue;
    }
    std::vector<const float*> others;
    for (size_t j = 0; j < bottom.size(); ++j)
      if (j != i) others.push_back(bottom[j]->data_on(d));
    EltwiseProductGradientRule rule{0, {}, dy, dx};
    for (size_t first = 0; first < others.size(); first += kEltwiseGroup) {
      rule.others = static_cast<int>(std::min(others.size() - first, static_cast<size_t>(kEltwiseGroup)));
      for (int b = 0; b < rule.others; ++b) rule.x[b] = others[first + b];
      rule.from = first == 0 ? dy : dx;
      for_each_element(context(), count, rule);
    }
  }
}

}  // namespace crema
