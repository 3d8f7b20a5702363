// BatchReindex: picks items of the first bottom by index. Bottoms: data (N, ...) and indices (M values, each in
// [0, N) once truncated toward zero as Caffe does: a fractional index is named in a warning once for the layer, one
// out of range or NaN is an error); top (M, ...) where item m is data item indices[m]. Items may be picked several times or
// not at all; backward adds each top item's gradient to the data item it came from. The indices get no
// gradient. No parameters.
// Runs on the CPU and the GPU (the rules below; batch_reindex.cu compiles them). Both check the indices on the
// host, where data layers write them; the GPU's backward gathers each data item's gradient from a list of its
// picks made there too.
#pragma once

#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// One value of the top per call: the value of the data item its index names.
struct BatchReindexForwardRule {
  const float* data;
  const float* indices;
  float* top;
  int item;  // values per item
  CREMA_HOST_DEVICE void operator()(int i) const {
    top[i] = data[static_cast<long long>(LabelClass(indices[i / item])) * item + i % item];
  }
};

// One value of the data's gradient per call: the sum of the top gradients of its item's picks, in the order of
// the picks (the CPU's order). `picks` lists, for the items' count N, N + 1 offsets and then the positions of
// the top that picked item 0, item 1, ...: item n's run from picks[n] to picks[n + 1].
struct BatchReindexBackwardRule {
  const float* top_diff;
  const float* picks;
  float* data_diff;
  int item, items;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const int n = j / item, k = j % item;
    const float* positions = picks + items + 1;
    float total = 0.f;
    for (int q = static_cast<int>(picks[n]); q < static_cast<int>(picks[n + 1]); ++q)
      total += top_diff[static_cast<long long>(positions[q]) * item + k];
    data_diff[j] = total;
  }
};

class BatchReindexLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchReindex"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
  // Backward reads the indices, not the data, nor the top.
  bool BackwardReadsBottom(int bottom) const override { return bottom == 1; }
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
  // Index m, truncated toward zero; throws where it is not an item of the data, warns (once) if fractional.
  int Index(const Blob& data, const Blob& indices, int m);
};

}  // namespace crema
