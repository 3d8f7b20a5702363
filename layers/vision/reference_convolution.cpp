#include "layers/vision/reference_convolution.hpp"

#include "core/math_functions.hpp"

namespace crema {

template <typename Product>
void ReferenceConvolutionLayer::ForEachProduct(Product product) const {
  const KernelGeometry& g = geometry_;
  const int axes = num_spatial_axes_;
  const int group_inputs = channels_ / group_, group_outputs = num_output_ / group_;
  const int positions = conv_output_spatial_size_;
  int taps = 1, input_size = 1;
  for (int a = 0; a < axes; ++a) {
    taps *= g.kernel[a];
    input_size *= conv_input_shape_[1 + a];
  }
  std::vector<int> position(axes), tap(axes);
  for (int p = 0; p < positions; ++p) {
    for (int a = axes - 1, rest = p; a >= 0; --a) {  // the last axis varies fastest
      position[a] = rest % conv_output_spatial_[a];
      rest /= conv_output_spatial_[a];
    }
    for (int t = 0; t < taps; ++t) {
      for (int a = axes - 1, rest = t; a >= 0; --a) {
        tap[a] = rest % g.kernel[a];
        rest /= g.kernel[a];
      }
      int offset = 0;
      bool inside = true;
      for (int a = 0; a < axes && inside; ++a) {
        const int x = position[a] * g.stride[a] - g.pad[a] + tap[a] * g.dilation[a];
        inside = x >= 0 && x < conv_input_shape_[1 + a];
        offset = offset * conv_input_shape_[1 + a] + x;
      }
      if (!inside) continue;
      for (int o = 0; o < num_output_; ++o) {
        const int first_channel = (o / group_outputs) * group_inputs;
        for (int c = 0; c < group_inputs; ++c)
          product(o * positions + p, (first_channel + c) * input_size + offset, (o * group_inputs + c) * taps + t);
      }
    }
  }
}

void ReferenceConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weights = params_[0]->cpu_data();
  const float* bias = bias_term_ ? params_[1]->cpu_data() : nullptr;
  for (size_t b = 0; b < bottom.size(); ++b) {
    for (int n = 0; n < num_; ++n) {
      const float* input = bottom[b]->cpu_data() + n * bottom_dim_;
      float* output = top[b]->mutable_cpu_data() + n * top_dim_;
      for (int o = 0; o < num_output_; ++o)
        cpu_set(top_spatial_size_, bias ? bias[o] : 0.f, output + o * top_spatial_size_);
      ForEachProduct([&](int out, int in, int w) { output[out] += weights[w] * input[in]; });
    }
  }
}

void ReferenceConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                             const std::vector<Blob*>& bottom) {
  const float* weights = params_[0]->cpu_data();
  float* weight_diff = param_propagate_down(0) ? params_[0]->mutable_cpu_diff() : nullptr;
  float* bias_diff = bias_term_ && param_propagate_down(1) ? params_[1]->mutable_cpu_diff() : nullptr;
  // Parameter gradients accumulate (the net zeroes them before a backward); bottom gradients are overwritten.
  for (size_t b = 0; b < top.size(); ++b) {
    for (int n = 0; n < num_; ++n) {
      const float* input = bottom[b]->cpu_data() + n * bottom_dim_;
      const float* output_diff = top[b]->cpu_diff() + n * top_dim_;
      float* input_diff = propagate_down[b] ? bottom[b]->mutable_cpu_diff() + n * bottom_dim_ : nullptr;
      if (input_diff != nullptr) cpu_set(bottom_dim_, 0.f, input_diff);
      if (bias_diff != nullptr)
        for (int o = 0; o < num_output_; ++o)
          for (int p = 0; p < top_spatial_size_; ++p) bias_diff[o] += output_diff[o * top_spatial_size_ + p];
      if (weight_diff == nullptr && input_diff == nullptr) continue;
      ForEachProduct([&](int out, int in, int w) {
        if (weight_diff != nullptr) weight_diff[w] += input[in] * output_diff[out];
        if (input_diff != nullptr) input_diff[in] += weights[w] * output_diff[out];
      });
    }
  }
}

}  // namespace crema
