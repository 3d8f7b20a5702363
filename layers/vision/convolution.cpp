#include "layers/vision/convolution.hpp"

namespace crema {

void ConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  RequestWorkspace(PlanImageProducts());
}

void ConvolutionLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardImages(bottom, top);
}

void ConvolutionLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  BackwardImages(top, propagate_down, bottom);
}

}  // namespace crema
