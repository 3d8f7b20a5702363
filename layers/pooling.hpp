// Pooling: the maximum (MAX) or mean (AVE) of each kernel window of each channel of a 4-d (N, C, H, W)
// input.
//
// pooling_param:
//   pool                  MAX (default), AVE, or STOCHASTIC (for non-negative inputs: in TRAIN a value drawn
//                         from each window with probability proportional to it, from the layer's saved random
//                         stream; in TEST the expectation sum(x^2) / sum(x); Caffe has it on the GPU only)
//   kernel_size | kernel_h + kernel_w, stride | stride_h + stride_w, pad | pad_h + pad_w (pad < kernel)
//   global_pooling        the kernel covers the whole plane (no pad, stride 1)
//   round_mode            CEIL (default, Caffe's rule): out = ceil((in + 2 * pad - kernel) / stride) + 1,
//                         dropping a last window that would start in the padding; FLOOR rounds down
// AVE divides by the window's area clipped to the padded input (padding counts as zeros). MAX may have a
// second top: the argmax of each window, as an index into its H * W plane.
#pragma once

#include <algorithm>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Pooling"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return param_.pooling_param().pool() == PoolingParameter::MAX ? 2 : 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Caffe's output size along one axis (CEIL or FLOOR rounding; below 1 when the kernel does not fit).
  static int PooledSize(int in, int kernel, int pad, int stride, bool ceil);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // Reads and checks pooling_param's window (LayerSetUp without the argmax blob; other engines share it).
  void ReadWindow();
  // Output size along one axis under round_mode.
  int OutputSize(int in, int kernel, int pad, int stride, const char* axis) const;
  // The input rows/columns [start, end) pooled by output (ph, pw), and the area AVE divides by: the window
  // clipped to the padded input (padding counts as zeros), before it is clipped to the input itself.
  struct Window {
    int h_start, h_end, w_start, w_end, area;
  };
  Window WindowAt(int ph, int pw) const {
    const int h_start = ph * stride_h_ - pad_h_, w_start = pw * stride_w_ - pad_w_;
    const int h_end = std::min(h_start + kernel_h_, height_ + pad_h_);
    const int w_end = std::min(w_start + kernel_w_, width_ + pad_w_);
    return {std::max(h_start, 0), std::min(h_end, height_), std::max(w_start, 0), std::min(w_end, width_),
            (h_end - h_start) * (w_end - w_start)};
  }
  // MAX over one plane: every output's window maximum and its position (the first of equal maxima).
  void MaxPlane(const float* image, float* output, float* argmax) const;
  // STOCHASTIC: a value of the window drawn with probability proportional to it (its position in *source), the
  // test-time expectation sum(x^2) / sum(x), and that expectation's gradient added to image_diff.
  float Sample(const float* image, const Window& win, float* source);
  float ProbabilityWeighted(const float* image, const Window& win) const;
  void ProbabilityWeightedGradient(const float* image, const Window& win, float top_diff, float* image_diff) const;

 protected:
  PoolingParameter::PoolMethod method_ = PoolingParameter::MAX;
  bool global_ = false;
  int kernel_h_ = 0, kernel_w_ = 0, stride_h_ = 1, stride_w_ = 1, pad_h_ = 0, pad_w_ = 0;
  int height_ = 0, width_ = 0, pooled_h_ = 0, pooled_w_ = 0;
  // Where each output came from, for backward (internal): MAX without a mask top (the argmax), STOCHASTIC (the
  // sampled position in TRAIN).
  Blob* argmax_ = nullptr;
};

}  // namespace crema
