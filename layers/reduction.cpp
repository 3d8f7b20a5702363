#include "layers/reduction.hpp"

#include <cmath>

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

}  // namespace crema
