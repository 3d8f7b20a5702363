#include "layers/deconvolution.hpp"

namespace crema {

void DeconvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  RequestWorkspace(column_floats());
}

void DeconvolutionLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const float* weights = blobs_[0]->data_on(d);
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->data_on(d);
    float* output = top[b]->mutable_data_on(d);
    for (int n = 0; n < num_; ++n) {
      BackwardData(input + n * bottom_dim_, weights, output + n * top_dim_);
      if (bias_term_) AddBias(output + n * top_dim_, blobs_[1]->data_on(d));
    }
  }
}

void DeconvolutionLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* weights = blobs_[0]->data_on(d);
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  // Parameter gradients accumulate (the net zeroes them before a backward); bottom gradients are overwritten.
  for (size_t b = 0; b < top.size(); ++b) {
    const float* input = bottom[b]->data_on(d);
    const float* top_diff = top[b]->diff_on(d);
    for (int n = 0; n < num_; ++n) {
      if (bias_grad) BiasGradient(top_diff + n * top_dim_, blobs_[1]->mutable_diff_on(d));
      // The convolution's input is the top here, and its output the bottom.
      if (weight_grad) WeightGemm(top_diff + n * top_dim_, input + n * bottom_dim_, blobs_[0]->mutable_diff_on(d));
      if (propagate_down[b])
        ForwardGemm(top_diff + n * top_dim_, weights, bottom[b]->mutable_diff_on(d) + n * bottom_dim_);
    }
  }
}

}  // namespace crema
