// Silence: takes any number of bottoms and produces nothing, so that blobs no one reads are not reported as
// net outputs. Forward does nothing; backward writes zero gradients to the bottoms that want one.
//
// Params: none.
// Bottoms -> tops: 1..n -> 0.
// Runs on the CPU and the GPU from the same code (the zeros are written on the layer's device).
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class SilenceLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Silence"; }
  // Backward reads no data (it zeroes the gradients).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 0; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace crema
