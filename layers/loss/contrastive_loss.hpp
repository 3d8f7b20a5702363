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
// A label is read as Caffe reads it: truncated toward zero (LabelClass), and any non-zero result is similar. A
// label other than 0 or 1 (2, -1, 0.5) is named in a warning once for the layer; a label that is not a finite
// number an int holds (NaN, 1e10) is an error naming its value and index.
//
// Gradients to a and b (opposite signs), none to y: asked for one (propagate_down), the layer writes zeros there
// with a warning once, as Caffe gives the labels none. For a dissimilar pair inside the margin the gradient with
// respect to a is -(margin - d) / (d + 1e-4) (a - b) / N: the 1e-4, as in Caffe, keeps it finite when a = b (the
// true gradient then is undefined). The differences a - b and the squared distances d_n^2 are kept from forward
// to backward in internal blobs (`<layer>.difference`, `<layer>.squared_distance`).
//
// Runs on the CPU and the GPU from the same code: rules for the differences, the pairs' terms and the gradients
// (contrastive_loss.cu compiles them); each pair's squared distance is a matrix-vector product with ones on the
// context (a pair may hold many values), the loss a sum. The labels are checked on the host.
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// difference = a - b, and its square (summed per pair afterwards).
struct ContrastiveDifferenceRule {
  const float* a;
  const float* b;
  float* difference;
  float* square;
  CREMA_HOST_DEVICE void operator()(int i) const {
    difference[i] = a[i] - b[i];
    square[i] = difference[i] * difference[i];
  }
};

// What the loss of pair n depends on: its label (checked on the host; truncated toward zero, non-zero is similar,
// as in Caffe) and squared distance.
struct ContrastivePair {
  const float* similar;
  const float* squared_distance;
  float margin;
  bool legacy;
  // The pair's term of the loss (before the 1 / 2N).
  CREMA_HOST_DEVICE float term(int n) const {
    const float d2 = squared_distance[n];
    if (LabelClass(similar[n]) != 0) return d2;
    if (legacy) return margin - d2 > 0.f ? margin - d2 : 0.f;
    const float gap = margin - sqrtf(d2);
    return gap > 0.f ? gap * gap : 0.f;
  }
  // d term / d a = 2 coefficient(n) (a - b): the pair's coefficient.
  CREMA_HOST_DEVICE float coefficient(int n) const {
    const float d2 = squared_distance[n];
    if (LabelClass(similar[n]) != 0) return 1.f;
    if (legacy) return margin - d2 > 0.f ? -1.f : 0.f;
    // The 1e-4 keeps the gradient finite where a = b.
    const float d = sqrtf(d2);
    const float gap = margin - d;
    return gap > 0.f ? -gap / (d + 1e-4f) : 0.f;
  }
};

struct ContrastiveTermRule {
  ContrastivePair pair;
  float* term;
  CREMA_HOST_DEVICE void operator()(int n) const { term[n] = pair.term(n); }
};

// dx = sign * dloss / N * coefficient(n) * (a - b) for every value of pair n = i / dim; sign -1 for b. The top's
// gradient is read on the device.
struct ContrastiveGradientRule {
  ContrastivePair pair;
  const float* difference;
  const float* loss_diff;
  float sign, num;
  int dim;
  float* dx;
  CREMA_HOST_DEVICE void operator()(int i) const {
    dx[i] = sign * loss_diff[0] / num * pair.coefficient(i / dim) * difference[i];
  }
};

class ContrastiveLossLayer : public BothDevices<LossLayer> {
 public:
  using BothDevices<LossLayer>::BothDevices;
  const char* type() const override { return "ContrastiveLoss"; }
  // Backward reads the pairs' labels and the differences Forward kept, not the features.
  bool BackwardReadsBottom(int bottom) const override { return bottom == 2; }
  int ExactNumBottomBlobs() const override { return 3; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Throws naming the first label that does not read as an int (NaN, out of range); warns once for the layer
  // naming the first label other than 0 or 1.
  void CheckSimilarityLabels(const Blob& labels);
  // The labels and squared distances, on the layer's device, for the rules.
  ContrastivePair PairsOn(const Blob& labels) const {
    return {labels.data_on(device()), squared_distance_->data_on(device()), margin_, legacy_};
  }

  float margin_ = 1.f;
  bool legacy_ = false;
  Blob* difference_ = nullptr;
  // Squared distances ||a_n - b_n||^2 of the last forward pass (N).
  Blob* squared_distance_ = nullptr;
  bool warned_label_ = false;          // a label other than 0 or 1 was named
  bool warned_label_gradient_ = false;  // a gradient to the labels was asked for
};

}  // namespace crema
