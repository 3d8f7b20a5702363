// Softmax along one axis: y = exp(x - max) / sum(exp(x - max)), the maximum taken along that axis so that no
// exponential overflows. The bottom is viewed as outer x channels x inner, with channels the softmax axis;
// the top has the bottom's shape.
//
// Params (softmax_param): axis (default 1; negative counts from the end).
// Runs on the CPU and the GPU from the same rules, one softmax per position (softmax.cu compiles them).
// Runs in place (top = bottom), as Caffe's does: the forward rule reads a position's maximum before writing and
// then each value just before overwriting it; the backward rule takes <dy, y> before writing and then reads only
// the element it writes.
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// The softmax over the `classes` values of one position (outer index n, inner index j), which lie `inner` apart.
struct SoftmaxForwardRule {
  const float* x;
  float* y;
  int classes, inner;
  CREMA_HOST_DEVICE void operator()(int position) const {
    const long long start = static_cast<long long>(position / inner) * classes * inner + position % inner;
    const float* xs = x + start;
    float* ys = y + start;
    float max_value = xs[0];
    for (int c = 1; c < classes; ++c) max_value = max_value < xs[c * inner] ? xs[c * inner] : max_value;
    float total = 0.f;
    for (int c = 0; c < classes; ++c) {
      ys[c * inner] = expf(xs[c * inner] - max_value);
      total += ys[c * inner];
    }
    for (int c = 0; c < classes; ++c) ys[c * inner] /= total;
  }
};

// dx = y * (dy - <dy, y>) at one position: the Jacobian diag(y) - y y^T applied to dy.
struct SoftmaxBackwardRule {
  const float* y;
  const float* dy;
  float* dx;
  int classes, inner;
  CREMA_HOST_DEVICE void operator()(int position) const {
    const long long start = static_cast<long long>(position / inner) * classes * inner + position % inner;
    float dot = 0.f;
    for (int c = 0; c < classes; ++c) dot += dy[start + c * inner] * y[start + c * inner];
    for (int c = 0; c < classes; ++c) dx[start + c * inner] = y[start + c * inner] * (dy[start + c * inner] - dot);
  }
};

class SoftmaxLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Softmax"; }
  // Backward reads the output (y (dy - sum(dy y))), not the input.
  bool BackwardReadsBottom(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  ClassAxis split_{};
};

}  // namespace crema
