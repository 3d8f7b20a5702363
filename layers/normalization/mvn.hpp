// MVN (mean-variance normalization): each group of values has its mean subtracted and, with
// normalize_variance, is divided by its standard deviation plus eps. A group is one channel of one item
// (axes 2 on of (N, C, ...)), or with across_channels one whole item (axes 1 on).
// mvn_param: normalize_variance (default true), across_channels (default false), eps (default 1e-9, added
// to the standard deviation, as in Caffe). One bottom, one top of its shape. The backward pass is the exact
// gradient of that function (Caffe's leaves eps out of it).
// Runs on the CPU (a loop per group, summing in double) and the GPU (the groups' means as matrix-vector
// products with ones, the rest by the rules below; mvn.cu compiles them).
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// Groups of `size` values lie one after another: value k is in group k / size.

// A value less its group's mean, into `centered` and its square into `squares` (each when given).
struct MVNCenterRule {
  const float* x;
  const float* mean;
  float* centered;
  float* squares;
  int size;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const float c = x[k] - mean[k / size];
    if (centered != nullptr) centered[k] = c;
    if (squares != nullptr) squares[k] = c * c;
  }
};

// A centered value divided by its group's standard deviation plus eps.
struct MVNScaleRule {
  const float* variance;
  float* y;
  float eps;
  int size;
  CREMA_HOST_DEVICE void operator()(int k) const { y[k] /= sqrtf(variance[k / size]) + eps; }
};

// dy times the centered value, whose group means enter the gradient.
struct MVNProductRule {
  const float* x;
  const float* mean;
  const float* dy;
  float* product;
  int size;
  CREMA_HOST_DEVICE void operator()(int k) const { product[k] = dy[k] * (x[k] - mean[k / size]); }
};

// The gradient of one value (see Backward_cpu); variance is null without normalize_variance.
struct MVNBackwardRule {
  const float* x;
  const float* dy;
  const float* mean;
  const float* variance;
  const float* dy_mean;
  const float* dy_centered_mean;
  float* dx;
  float eps;
  int size;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const int g = k / size;
    if (variance == nullptr) {
      dx[k] = dy[k] - dy_mean[g];
      return;
    }
    const float s = sqrtf(variance[g]), d = s + eps;
    const float second = s > 0.f ? dy_centered_mean[g] / (d * d * s) : 0.f;
    dx[k] = (dy[k] - dy_mean[g]) / d - (x[k] - mean[g]) * second;
  }
};

class MVNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "MVN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardReadsTop(int) const override { return false; }  // the input only
  // Its means are matrix-vector products.
  bool ThreadCountChangesPass(bool backward) const override { return backward; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Mean and standard deviation (not including eps) of values[0, size_).
  void Moments(const float* values, double* mean, double* deviation) const;
  // On the layer's device: the mean of each group of `values` into means[0, groups_).
  void GroupMeans(const float* values, float* means);
  int groups_ = 0, size_ = 0;
};

}  // namespace crema
