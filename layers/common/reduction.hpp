// Reduction: reduces every axis from `axis` on to one value, for each position of the axes before it:
//   SUM: coeff * sum x;  ASUM: coeff * sum |x|;  SUMSQ: coeff * sum x^2;  MEAN: coeff * sum x / (values reduced).
// The top's shape is the bottom's axes before `axis` (a scalar, shape (), for axis 0). Backward spreads dy
// with the matching derivative: coeff, coeff * sign(x) (0 at 0), 2 coeff x, coeff / (values reduced).
//
// Params (reduction_param): operation (SUM (default), ASUM, SUMSQ, MEAN), axis (default 0; negative counts
// from the end), coeff (default 1).
// Bottoms -> tops: 1 -> 1.
// Runs on the CPU (sums in double) and the GPU (sums as a matrix-vector product with ones, over |x| or x^2 from
// a rule for ASUM and SUMSQ; the gradient by a rule; reduction.cu compiles the rules).
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// |x| (ASUM) or x^2 (SUMSQ) of one value, summed afterwards.
struct ReductionTermRule {
  ReductionParameter::ReductionOp op;
  const float* x;
  float* term;
  CREMA_HOST_DEVICE void operator()(int k) const {
    term[k] = op == ReductionParameter::ASUM ? fabsf(x[k]) : x[k] * x[k];
  }
};

// One value's gradient: its sum's, times the derivative of its term.
struct ReductionBackwardRule {
  ReductionParameter::ReductionOp op;
  const float* x;
  const float* dy;
  float* dx;
  float scale;
  int reduced;
  CREMA_HOST_DEVICE void operator()(int k) const {
    const float g = scale * dy[k / reduced];
    if (op == ReductionParameter::ASUM) {
      dx[k] = x[k] > 0.f ? g : (x[k] < 0.f ? -g : 0.f);
    } else if (op == ReductionParameter::SUMSQ) {
      dx[k] = 2.f * g * x[k];
    } else {
      dx[k] = g;
    }
  }
};

class ReductionLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Reduction"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // SUM and MEAN spread the gradient evenly; ASUM and SUMSQ need the input's signs and values.
  bool BackwardReadsBottom(int) const override {
    return param_.reduction_param().operation() == ReductionParameter::ASUM ||
           param_.reduction_param().operation() == ReductionParameter::SUMSQ;
  }
  bool BackwardReadsTop(int) const override { return false; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int outer_ = 1;      // values of the top
  int reduced_ = 1;    // values reduced into each
  float scale_ = 1.f;  // coeff, divided by reduced_ for MEAN
};

}  // namespace crema
