// DummyData: tops filled by fillers, for tests and for nets that need a constant or random input
// (dummy_data_param):
//   shape                 one per top, or one for all tops; or the deprecated 4-d form num, channels,
//                         height, width (each one value for all tops or one per top); not both forms
//   data_filler           one per top, or one for all tops; constant 0 when none
// Constant fillers fill their top once, at set-up; any other filler draws the top anew on every forward pass,
// from the layer's random stream (saved with the solver state, so a resumed run draws the same values).
// No bottoms; no gradient.
// Runs on the CPU and the GPU: fillers draw on the host (src/core/filler.cpp) in both, and the top's next reader
// on the GPU copies it over, as with the data layers.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class DummyDataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "DummyData"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    Forward_cpu(bottom, top);
  }
  void Backward_gpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}

 private:
  std::vector<std::vector<int>> shapes_;
  std::vector<FillerParameter> fillers_;
  std::vector<bool> refill_;
};

}  // namespace crema
