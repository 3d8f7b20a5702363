// MVN (mean-variance normalization): each group of values has its mean subtracted and, with
// normalize_variance, is divided by its standard deviation plus eps. A group is one channel of one item
// (axes 2 on of (N, C, ...)), or with across_channels one whole item (axes 1 on).
// mvn_param: normalize_variance (default true), across_channels (default false), eps (default 1e-9, added
// to the standard deviation, as in Caffe). One bottom, one top of its shape. The backward pass is the exact
// gradient of that function (Caffe's leaves eps out of it).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class MVNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "MVN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Mean and standard deviation (not including eps) of values[0, size_).
  void Moments(const float* values, double* mean, double* deviation) const;
  int groups_ = 0, size_ = 0;
};

}  // namespace crema
