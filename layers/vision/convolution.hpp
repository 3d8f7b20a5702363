// Convolution, engine `native` (the CPU default where oneDNN's engine is absent or refuses): per image, the bottom's
// patches are unrolled into the net's workspace (im2col) and multiplied with the weights by cpu_gemm; pointwise (1x1,
// stride 1, no pad) kernels skip the unrolling. Parameters and shapes: layers/vision/base_convolution.hpp. The engine
// `reference` (layers/vision/reference_convolution.hpp) computes the same by direct loops.
#pragma once

#include <vector>

#include "layers/vision/base_convolution.hpp"

namespace crema {

class ConvolutionLayer : public BothDevices<BaseConvolutionLayer> {
 public:
  using BothDevices<BaseConvolutionLayer>::BothDevices;
  const char* type() const override { return "Convolution"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace crema
