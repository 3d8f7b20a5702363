// ArgMax: the indices of the top_k largest values, largest first.
//   Without argmax_param.axis: over all of each item's values (the bottom seen as N x (everything else)); the
//   top has shape N x 1 x top_k (with more axes of size 1 when the bottom has more than 3), or N x 2 x top_k
//   with out_max_val: the indices in channel 0 and the values in channel 1.
//   With an axis: along that axis at every other position; the top has the bottom's shape with top_k along
//   the axis, holding the indices, or with out_max_val the values instead.
// Equal values are ordered by index, the higher index first (Caffe's order: it sorts (value, index) pairs
// in descending order).
//
// Params (argmax_param): out_max_val (default false), top_k (default 1, at least 1, at most the values
// compared), axis (optional; negative counts from the end).
// Bottoms -> tops: 1 -> 1.
// No gradient, as in Caffe: backward with propagate_down set is an error naming the layer, and force_backward
// does not reach through it.
// Runs on the CPU (a partial sort per search) and the GPU (the rule below, one search per call; argmax.cu
// compiles it).
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One search per call: the top_k largest of `compared` values lying `inner` apart, in the order above. A GPU
// thread has no room for a sorted list of any length, so the k-th is found by a scan for the largest value
// that ranks below the (k-1)-th: top_k scans of the values, which for the usual top_k of 1 to 5 costs less
// than sorting.
struct ArgMaxRule {
  const float* x;
  float* y;
  int compared, inner, top_k;
  bool along_axis, out_max_val;
  CREMA_HOST_DEVICE void operator()(int search) const {
    const int outer = search / inner, position = search % inner;
    const float* values = x + static_cast<long long>(outer) * compared * inner + position;
    float last_value = 0.f;
    int last = -1;
    for (int k = 0; k < top_k; ++k) {
      int best = -1;
      float best_value = 0.f;
      for (int j = 0; j < compared; ++j) {
        const float v = values[static_cast<long long>(j) * inner];
        // Only values ranked below the last pick: smaller, or equal with a smaller index.
        if (last >= 0 && !(v < last_value || (v == last_value && j < last))) continue;
        // j grows, so on equal values the later index wins: the higher index ranks first.
        if (best < 0 || v >= best_value) {
          best = j;
          best_value = v;
        }
      }
      if (along_axis) {
        y[static_cast<long long>(outer) * top_k * inner + static_cast<long long>(k) * inner + position] =
            out_max_val ? best_value : static_cast<float>(best);
      } else {
        float* out = y + static_cast<long long>(search) * (out_max_val ? 2 : 1) * top_k;
        out[k] = static_cast<float>(best);
        if (out_max_val) out[top_k + k] = best_value;
      }
      last = best;
      last_value = best_value;
    }
  }
};

class ArgMaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ArgMax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int top_k_ = 1;
  int axis_ = -1;     // the canonical axis, or -1 without argmax_param.axis
  int compared_ = 1;  // values compared for one result
  int inner_ = 1;     // stride between them (1 without an axis)
};

}  // namespace crema
