#include "layers/convolution.hpp"

namespace crema {

void ConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  RequestWorkspace(column_floats());
}

// Images run one after another: the matrix products use the BLAS's own threads, and an OpenMP loop over the
// batch around them would fight those threads for the cores (with the pthread OpenBLAS, measured several
// times slower on a 2-core machine).
void ConvolutionLayer::Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const float* weights = blobs_[0]->data_on(d);
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->data_on(d);
    float* output = top[b]->mutable_data_on(d);
    for (int n = 0; n < num_; ++n) {
      ForwardGemm(input + n * bottom_dim_, weights, output + n * top_dim_);
      if (bias_term_) AddBias(output + n * top_dim_, blobs_[1]->data_on(d));
    }
  }
}

void ConvolutionLayer::Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* weights = blobs_[0]->data_on(d);
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  // Parameter gradients accumulate (over images, bottoms and calls): the net zeroes them before a backward.
  for (size_t b = 0; b < top.size(); ++b) {
    const float* input = bottom[b]->data_on(d);
    const float* top_diff = top[b]->diff_on(d);
    for (int n = 0; n < num_; ++n) {
      if (bias_grad) BiasGradient(top_diff + n * top_dim_, blobs_[1]->mutable_diff_on(d));
      if (weight_grad) WeightGemm(input + n * bottom_dim_, top_diff + n * top_dim_, blobs_[0]->mutable_diff_on(d));
      if (propagate_down[b])
        BackwardData(top_diff + n * top_dim_, weights, bottom[b]->mutable_diff_on(d) + n * bottom_dim_);
    }
  }
}

}  // namespace crema
