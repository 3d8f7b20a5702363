// BatchReindex: picks items of the first bottom by index. Bottoms: data (N, ...) and indices (M values, each an
// integer in [0, N)); top (M, ...) where item m is data item indices[m]. Items may be picked several times or
// not at all; backward adds each top item's gradient to the data item it came from. The indices get no
// gradient. No parameters.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class BatchReindexLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchReindex"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int Index(const Blob& data, const Blob& indices, int m) const;
};

}  // namespace crema
