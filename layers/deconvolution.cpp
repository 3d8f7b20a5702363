#include "layers/deconvolution.hpp"

namespace crema {

void DeconvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  RequestWorkspace(column_floats());
}

void DeconvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weights = blobs_[0]->cpu_data();
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->cpu_data();
    float* output = top[b]->mutable_cpu_data();
    for (int n = 0; n < num_; ++n) {
      BackwardData(input + n * bottom_dim_, weights, output + n * top_dim_);
      if (bias_term_) AddBias(output + n * top_dim_, blobs_[1]->cpu_data());
    }
  }
}

void DeconvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const float* weights = blobs_[0]->cpu_data();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  // Parameter gradients accumulate (the net zeroes them before a backward); bottom gradients are overwritten.
  for (size_t b = 0; b < top.size(); ++b) {
    const float* input = bottom[b]->cpu_data();
    const float* top_diff = top[b]->cpu_diff();
    for (int n = 0; n < num_; ++n) {
      if (bias_grad) BiasGradient(top_diff + n * top_dim_, blobs_[1]->mutable_cpu_diff());
      // The convolution's input is the top here, and its output the bottom.
      if (weight_grad) WeightGemm(top_diff + n * top_dim_, input + n * bottom_dim_, blobs_[0]->mutable_cpu_diff());
      if (propagate_down[b])
        ForwardGemm(top_diff + n * top_dim_, weights, bottom[b]->mutable_cpu_diff() + n * bottom_dim_);
    }
  }
}

}  // namespace crema
