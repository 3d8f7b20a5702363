// Reduction: reduces every axis from `axis` on to one value, for each position of the axes before it:
//   SUM: coeff * sum x;  ASUM: coeff * sum |x|;  SUMSQ: coeff * sum x^2;  MEAN: coeff * sum x / (values reduced).
// The top's shape is the bottom's axes before `axis` (a scalar, shape (), for axis 0). Backward spreads dy
// with the matching derivative: coeff, coeff * sign(x) (0 at 0), 2 coeff x, coeff / (values reduced).
//
// Params (reduction_param): operation (SUM (default), ASUM, SUMSQ, MEAN), axis (default 0; negative counts
// from the end), coeff (default 1).
// Bottoms -> tops: 1 -> 1.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ReductionLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Reduction"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int outer_ = 1;      // values of the top
  int reduced_ = 1;    // values reduced into each
  float scale_ = 1.f;  // coeff, divided by reduced_ for MEAN
};

}  // namespace crema
