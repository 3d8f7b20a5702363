// Convolution, engine `reference`: direct loops over every output, input channel and kernel tap, with no
// unrolling, no BLAS and no workspace. It is the last engine in Convolution's list and the independent
// reference the other engines are compared against (tests/test_convolution_layer.cpp); force it with
// --engine=Convolution:reference. Parameters and shapes: layers/vision/base_convolution.hpp.
#pragma once

#include <vector>

#include "layers/vision/base_convolution.hpp"

namespace crema {

class ReferenceConvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Convolution"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Calls product(output_index, input_index, weight_index) for every weight-times-input term that the
  // convolution of one image sums; the indices are into one image of the top, one image of the bottom and the
  // weights. Taps that fall into the padding have no term.
  template <typename Product>
  void ForEachProduct(Product product) const;
};

}  // namespace crema
