#include "layers/softmax.hpp"

#include <algorithm>
#include <cmath>

#include "core/elementwise.hpp"

namespace crema {

void SoftmaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  split_ = SplitAtClassAxis(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis");
  top[0]->ReshapeLike(*bottom[0]);
}

void SoftmaxLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int C = split_.classes, inner = split_.inner, outer = split_.outer;
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold()) collapse(2)
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      // One softmax over the C values at stride `inner` starting here.
      const float* xs = x + n * C * inner + j;
      float* ys = y + n * C * inner + j;
      float max_value = xs[0];
      for (int c = 1; c < C; ++c) max_value = std::max(max_value, xs[c * inner]);
      float sum = 0.f;
      for (int c = 0; c < C; ++c) {
        ys[c * inner] = std::exp(xs[c * inner] - max_value);
        sum += ys[c * inner];
      }
      for (int c = 0; c < C; ++c) ys[c * inner] /= sum;
    }
  }
}

void SoftmaxLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int C = split_.classes, inner = split_.inner, outer = split_.outer;
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold()) collapse(2)
  for (int n = 0; n < outer; ++n) {
    for (int j = 0; j < inner; ++j) {
      // dx = y * (dy - <dy, y>): the Jacobian diag(y) - y y^T applied to dy.
      const int start = n * C * inner + j;
      float dot = 0.f;
      for (int c = 0; c < C; ++c) dot += dy[start + c * inner] * y[start + c * inner];
      for (int c = 0; c < C; ++c) dx[start + c * inner] = y[start + c * inner] * (dy[start + c * inner] - dot);
    }
  }
}

}  // namespace crema
