// The contrastive loss of a siamese network (Hadsell, Chopra and LeCun, 2006): pairs labelled similar are pulled
// together, dissimilar ones pushed at least `margin` apart. With d_n = ||a_n - b_n|| (Euclidean, over every
// value of item n):
//   loss = 1/(2N) sum_n [ y_n d_n^2 + (1 - y_n) max(margin - d_n, 0)^2 ]
// or, with legacy_version, (1 - y_n) max(margin - d_n^2, 0) for the dissimilar pairs. N is the first axis.
//
// Bottoms: a and b (the same shape, N x ...), and the similarity labels y (N values, 1 similar, 0 dissimilar).
// Top: the loss (a scalar, loss weight 1 unless set). Params: contrastive_loss_param (margin, default 1;
// legacy_version, default false).
//
// Gradients to a and b (opposite signs), none to y. For a dissimilar pair inside the margin the gradient with
// respect to a is -(margin - d) / (d + 1e-4) (a - b) / N: the 1e-4, as in Caffe, keeps it finite when a = b (the
// true gradient then is undefined). The differences a - b are kept from forward to backward in an internal blob
// (`<layer>.difference`). Difference from Caffe: Caffe reads y truncated to an integer and treats any nonzero
// value as similar; here a label other than 0 or 1 is an error naming its value and index.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class ContrastiveLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ContrastiveLoss"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Whether the pair at `index` is similar; throws naming the label unless it is 0 or 1.
  bool Similar(const Blob& labels, int index) const;

  float margin_ = 1.f;
  bool legacy_ = false;
  Blob* difference_ = nullptr;
  // Squared distances ||a_n - b_n||^2 of the last forward pass.
  std::vector<double> squared_distance_;
};

}  // namespace crema
