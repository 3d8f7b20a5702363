// Eltwise: combines bottoms of one shape element by element into a top of that shape.
//   SUM:  y = sum_i coeff_i * x_i (coeff 1 for every bottom unless given); dx_i = coeff_i * dy.
//   PROD: y = prod_i x_i; dx_i = dy * prod_{j != i} x_j when stable_prod_grad (the default), else dy * y / x_i
//         (cheaper, but infinite or NaN where x_i is 0).
//   MAX:  y = max_i x_i; the index of the bottom that won each element is kept in the internal blob
//         "<layer>.argmax", and backward sends dy to that bottom only (0 to the others).
//
// Params (eltwise_param): operation (PROD, SUM (default), MAX), coeff (none, or one per bottom; an error with
// PROD and, as in Caffe, accepted but unused with MAX), stable_prod_grad (default true).
// Bottoms -> tops: 2..n -> 1.
// Differs from Caffe: MAX breaks ties towards the earliest bottom everywhere; Caffe's CPU code gives a tie
// between bottoms 0 and 1 to bottom 1 (later ties go to the earlier bottom in both).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class EltwiseLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Eltwise"; }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 protected:
  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  std::vector<float> coeffs_;

 private:
  Blob* argmax_ = nullptr;  // MAX only: the winning bottom of each element
};

}  // namespace crema
