#include "layers/common/reduction.hpp"

#include <cmath>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"

namespace crema {

void ReductionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ReductionParameter& p = param_.reduction_param();
  const Blob& x = *bottom[0];
  // A 0-axis bottom (a scalar) has only axis 0 to reduce from: everything, which is its one value.
  const int axis = x.num_axes() == 0 && p.axis() == 0 ? 0 : CanonicalAxis(x, p.axis(), "reduction_param.axis");
  outer_ = x.count(0, axis);
  reduced_ = x.count(axis);
  scale_ = p.coeff();
  if (p.operation() == ReductionParameter::MEAN && reduced_ > 0) scale_ /= static_cast<float>(reduced_);
  top[0]->Reshape(std::vector<int>(x.shape().begin(), x.shape().begin() + axis));
  // The GPU code sums the terms of ASUM and SUMSQ from scratch memory.
  const ReductionParameter::ReductionOp op = p.operation();
  RequestWorkspace(op == ReductionParameter::ASUM || op == ReductionParameter::SUMSQ ? x.count() : 0);
}

void ReductionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ReductionParameter::ReductionOp op = param_.reduction_param().operation();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < outer_; ++n) {
    const float* block = x + n * reduced_;
    double sum = 0;
    for (int k = 0; k < reduced_; ++k) {
      switch (op) {
        case ReductionParameter::ASUM:
          sum += std::fabs(block[k]);
          break;
        case ReductionParameter::SUMSQ:
          sum += static_cast<double>(block[k]) * block[k];
          break;
        case ReductionParameter::SUM:
        case ReductionParameter::MEAN:
          sum += block[k];
          break;
      }
    }
    y[n] = static_cast<float>(scale_ * sum);
  }
}

void ReductionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const ReductionParameter::ReductionOp op = param_.reduction_param().operation();
  const float* x = bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < outer_; ++n) {
    const float g = scale_ * dy[n];
    const int begin = n * reduced_, end = begin + reduced_;
    for (int k = begin; k < end; ++k) {
      switch (op) {
        case ReductionParameter::ASUM:
          dx[k] = x[k] > 0.f ? g : (x[k] < 0.f ? -g : 0.f);
          break;
        case ReductionParameter::SUMSQ:
          dx[k] = 2.f * g * x[k];
          break;
        case ReductionParameter::SUM:
        case ReductionParameter::MEAN:
          dx[k] = g;
          break;
      }
    }
  }
}

void ReductionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ReductionParameter::ReductionOp op = param_.reduction_param().operation();
  const Device d = device();
  float* y = top[0]->mutable_data_on(d);
  if (reduced_ == 0) {
    set(context(), outer_, 0.f, y);  // sums of nothing (a BLAS call with an empty dimension leaves y as it is)
    return;
  }
  const float* terms = bottom[0]->data_on(d);
  if (op == ReductionParameter::ASUM || op == ReductionParameter::SUMSQ) {
    for_each_element(context(), bottom[0]->count(), ReductionTermRule{op, terms, workspace()});
    terms = workspace();
  }
  gemv(context(), Transpose::kNo, outer_, reduced_, scale_, terms, context().ones(reduced_), 0.f, y);
}

void ReductionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(context(), bottom[0]->count(),
                   ReductionBackwardRule{param_.reduction_param().operation(), bottom[0]->data_on(d),
                                         top[0]->diff_on(d), bottom[0]->mutable_diff_on(d), scale_, reduced_});
}

}  // namespace crema
