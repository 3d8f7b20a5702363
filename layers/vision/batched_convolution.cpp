#include "layers/vision/batched_convolution.hpp"

#include <algorithm>
#include <cstring>

#include "core/math_functions.hpp"

namespace crema {

void BatchedConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  const size_t per_image = static_cast<size_t>(column_rows() + conv_out_channels_) * conv_output_spatial_size_;
  const int most = static_cast<int>(std::clamp<size_t>(kBlockFloats / per_image, 1, std::max(num_, 1)));
  // Even blocks: 100 images at most 38 a block run as 34 + 33 + 33, not 38 + 38 + 24.
  const int blocks = (std::max(num_, 1) + most - 1) / most;
  block_ = (std::max(num_, 1) + blocks - 1) / blocks;
  RequestWorkspace(per_image * block_);
}

void BatchedConvolutionLayer::UnrollBlock(const float* input, int first, int count, float* columns) const {
  const size_t positions = conv_output_spatial_size_;
  for (int i = 0; i < count; ++i)
    Unroll(input + static_cast<size_t>(first + i) * bottom_dim_, columns + i * positions, count * positions);
}

void BatchedConvolutionLayer::MultiplyWeights(const float* weights, const float* columns, int count,
                                              float* staging) const {
  const int width = count * conv_output_spatial_size_;
  const int group_outputs = conv_out_channels_ / group_;
  for (int g = 0; g < group_; ++g) {
    cpu_gemm(Transpose::kNo, Transpose::kNo, group_outputs, width, kernel_dim_, 1.f,
             weights + static_cast<size_t>(g) * group_outputs * kernel_dim_,
             columns + static_cast<size_t>(g) * kernel_dim_ * width, 0.f,
             staging + static_cast<size_t>(g) * group_outputs * width);
  }
}

void BatchedConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weights = params_[0]->cpu_data();
  const float* bias = bias_term_ ? params_[1]->cpu_data() : nullptr;
  const size_t positions = conv_output_spatial_size_;
  float* columns = workspace();
  float* staging = columns + static_cast<size_t>(column_rows()) * block_ * positions;
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->cpu_data();
    float* output = top[b]->mutable_cpu_data();
    for (int first = 0; first < num_; first += block_) {
      const int count = std::min(block_, num_ - first);
      UnrollBlock(input, first, count, columns);
      MultiplyWeights(weights, columns, count, staging);
      // staging (channel, image, position) -> top (image, channel, position), plus the bias.
      for (int i = 0; i < count; ++i) {
        for (int c = 0; c < num_output_; ++c) {
          const float* from = staging + (static_cast<size_t>(c) * count + i) * positions;
          float* to = output + static_cast<size_t>(first + i) * top_dim_ + c * positions;
          if (bias == nullptr) {
            std::memcpy(to, from, sizeof(float) * positions);
          } else {
            const float shift = bias[c];
            for (size_t p = 0; p < positions; ++p) to[p] = from[p] + shift;
          }
        }
      }
    }
  }
}

void BatchedConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                           const std::vector<Blob*>& bottom) {
  const float* weights = params_[0]->cpu_data();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const size_t positions = conv_output_spatial_size_;
  const int group_outputs = conv_out_channels_ / group_;
  float* columns = workspace();
  float* staging = columns + static_cast<size_t>(column_rows()) * block_ * positions;
  // Parameter gradients accumulate (over blocks, bottoms and calls): the net zeroes them before a backward.
  for (size_t b = 0; b < top.size(); ++b) {
    if (!weight_grad && !bias_grad && !propagate_down[b]) continue;
    const float* input = bottom[b]->cpu_data();
    const float* top_diff = top[b]->cpu_diff();
    for (int first = 0; first < num_; first += block_) {
      const int count = std::min(block_, num_ - first);
      const int width = count * static_cast<int>(positions);
      // top gradient (image, channel, position) -> staging (channel, image, position)
      for (int i = 0; i < count; ++i)
        for (int c = 0; c < num_output_; ++c)
          std::memcpy(staging + (static_cast<size_t>(c) * count + i) * positions,
                      top_diff + static_cast<size_t>(first + i) * top_dim_ + c * positions, sizeof(float) * positions);
      if (bias_grad)
        cpu_gemv(Transpose::kNo, num_output_, width, 1.f, staging, context().ones(width), 1.f,
                 params_[1]->mutable_cpu_diff());
      if (weight_grad) {
        UnrollBlock(input, first, count, columns);
        float* weight_diff = params_[0]->mutable_cpu_diff();
        for (int g = 0; g < group_; ++g) {
          cpu_gemm(Transpose::kNo, Transpose::kYes, group_outputs, kernel_dim_, width, 1.f,
                   staging + static_cast<size_t>(g) * group_outputs * width,
                   columns + static_cast<size_t>(g) * kernel_dim_ * width, 1.f,
                   weight_diff + static_cast<size_t>(g) * group_outputs * kernel_dim_);
        }
      }
      if (propagate_down[b]) {
        for (int g = 0; g < group_; ++g) {
          cpu_gemm(Transpose::kYes, Transpose::kNo, kernel_dim_, width, group_outputs, 1.f,
                   weights + static_cast<size_t>(g) * group_outputs * kernel_dim_,
                   staging + static_cast<size_t>(g) * group_outputs * width, 0.f,
                   columns + static_cast<size_t>(g) * kernel_dim_ * width);
        }
        float* input_diff = bottom[b]->mutable_cpu_diff();
        for (int i = 0; i < count; ++i)
          Fold(columns + i * positions, input_diff + static_cast<size_t>(first + i) * bottom_dim_, width);
      }
    }
  }
}

}  // namespace crema
