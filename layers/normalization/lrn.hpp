// LRN (local response normalisation): y = x * scale^-beta, where scale sums the squares of x over a
// neighbourhood of each value:
//   ACROSS_CHANNELS  scale(n, c, h, w) = k + alpha / local_size * sum of x(n, c', h, w)^2 over the local_size
//                    channels c' centred on c (those outside [0, C) count as 0)
//   WITHIN_CHANNEL   scale(n, c, h, w) = 1 + alpha / local_size^2 * sum of x(n, c, h', w')^2 over the
//                    local_size x local_size window centred on (h, w), zero padded
//
// lrn_param: local_size (odd, default 5), alpha (default 1), beta (default 0.75), k (default 1; as in Caffe,
// WITHIN_CHANNEL ignores it and adds 1), norm_region (ACROSS_CHANNELS, WITHIN_CHANNEL), engine (CUDNN: the cudnn
// engine of layers/normalization/cudnn_lrn.hpp on a GPU, where it accepts).
// Bottoms -> tops: 1 -> 1, a 4-d (N, C, H, W) bottom and a top of its shape. No blobs; the scale is kept from
// forward to backward in the internal blob `<layer>.scale`. Backward recomputes y from x and the scale, so a
// later in-place layer may overwrite the top; backward's
// dy * y / scale takes a workspace the size of the input.
// The native engine runs on the CPU and the GPU from the same rules, one value per call (lrn.cu compiles them).
#pragma once

#include <cmath>
#include <vector>

#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// The neighbourhoods of LRN over an (N, C, H, W) blob, by value (a kernel argument).
struct LRNWindows {
  int channels, height, width, pre;
  bool across;
  // The sum of v, or of v^2 when `squares`, over the neighbours of value j (itself included), in the order the
  // neighbours lie in memory.
  CREMA_HOST_DEVICE float Sum(const float* v, int j, bool squares) const {
    const int w = j % width, h = j / width % height, c = j / (width * height) % channels;
    const int plane = height * width;
    float total = 0.f;
    if (across) {
      const int first = c - pre > 0 ? c - pre : 0, last = c + pre < channels - 1 ? c + pre : channels - 1;
      for (int q = j + (first - c) * plane, end = j + (last - c) * plane; q <= end; q += plane)
        total += squares ? v[q] * v[q] : v[q];
    } else {
      const int first_h = h - pre > 0 ? h - pre : 0, last_h = h + pre < height - 1 ? h + pre : height - 1;
      const int first_w = w - pre > 0 ? w - pre : 0, last_w = w + pre < width - 1 ? w + pre : width - 1;
      for (int hh = first_h; hh <= last_h; ++hh)
        for (int q = j + (hh - h) * width + first_w - w, end = q + last_w - first_w; q <= end; ++q)
          total += squares ? v[q] * v[q] : v[q];
    }
    return total;
  }
};

// scale = base + factor * (sum of the neighbours' squares); y = x * scale^-beta.
struct LRNForwardRule {
  const float* x;
  float* scale;
  float* y;
  LRNWindows windows;
  float base, factor, beta;
  CREMA_HOST_DEVICE void operator()(int j) const {
    scale[j] = base + factor * windows.Sum(x, j, true);
    y[j] = x[j] * powf(scale[j], -beta);
  }
};

// ratio = dy * y / scale = dy * x * scale^(-beta - 1), which backward sums over each neighbourhood.
struct LRNRatioRule {
  const float* x;
  const float* dy;
  const float* scale;
  float* ratio;
  float beta;
  CREMA_HOST_DEVICE void operator()(int j) const { ratio[j] = dy[j] * x[j] * powf(scale[j], -beta - 1.f); }
};

// dx_p = dy_p * scale_p^-beta - 2 * beta * factor * x_p * (sum over q with p in window(q) of ratio_q); the
// windows are symmetric, so those q are p's own neighbours.
struct LRNBackwardRule {
  const float* x;
  const float* dy;
  const float* scale;
  const float* ratio;
  float* dx;
  LRNWindows windows;
  float factor, beta;
  CREMA_HOST_DEVICE void operator()(int j) const {
    dx[j] = dy[j] * powf(scale[j], -beta) - 2.f * beta * factor * x[j] * windows.Sum(ratio, j, false);
  }
};

class LRNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LRN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // Every engine's backward reads the input (with the native scale or oneDNN's workspace; cuDNN recomputes the
  // output), never the output.
  bool BackwardReadsTop(int) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // Reads and checks lrn_param (LayerSetUp without the scale blob; other engines share it).
  void ReadParameters();
  // Checks the bottom's shape and records it.
  void ReadShape(const Blob& input);

 private:
  // The rules on the layer's device: both slots of each pass.
  void ForwardByRules(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void BackwardByRules(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                       const std::vector<Blob*>& bottom);
  LRNWindows windows() const { return {channels_, height_, width_, pre_, across_}; }
  // WITHIN_CHANNEL ignores k (as Caffe) and averages over the window's area.
  float base() const { return across_ ? k_ : 1.f; }
  float factor() const { return across_ ? alpha_ / size_ : alpha_ / (size_ * size_); }

 protected:
  int size_ = 5, pre_ = 2;
  float alpha_ = 1.f, beta_ = 0.75f, k_ = 1.f;
  bool across_ = true;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob* scale_ = nullptr;
};

}  // namespace crema
