// Pooling: the maximum (MAX) or mean (AVE) of each kernel window of each channel of a 4-d (N, C, H, W)
// input.
//
// pooling_param:
//   pool                  MAX (default), AVE, or STOCHASTIC (for non-negative inputs: in TRAIN a value drawn
//                         from each window with probability proportional to it; in TEST the expectation
//                         sum(x^2) / sum(x))
//   kernel_size | kernel_h + kernel_w, stride | stride_h + stride_w, pad | pad_h + pad_w (pad < kernel)
//   global_pooling        the kernel covers the whole plane (no pad, stride 1)
//   round_mode            CEIL (default, Caffe's rule): out = ceil((in + 2 * pad - kernel) / stride) + 1,
//                         dropping a last window that would start in the padding; FLOOR rounds down
// AVE divides by the window's area clipped to the padded input (padding counts as zeros). MAX may have a
// second top: the argmax of each window, as an index into its H * W plane.
// The native engine runs every method on the CPU and the GPU from the same rules (pooling.cu compiles them).
// STOCHASTIC's draws come from a counter-based generator (core/philox.hpp), as Dropout's: each TRAIN pass takes
// one key from the layer's saved random stream, and output i draws value i of that key's stream, so both
// devices draw the same samples and a resumed run draws the uninterrupted one's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/elementwise.hpp"
#include "core/philox.hpp"
#include "layers/layer.hpp"

namespace crema {

// The windows of 2-d pooling over one plane, by value (a kernel argument).
struct PoolingWindows {
  int height, width, pooled_h, pooled_w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  // The input rows/columns [start, end) pooled by output (ph, pw), and the area AVE divides by: the window
  // clipped to the padded input (padding counts as zeros), before it is clipped to the input itself.
  struct Window {
    int h_start, h_end, w_start, w_end, area;
    CREMA_HOST_DEVICE bool empty() const { return h_start >= h_end || w_start >= w_end; }
    CREMA_HOST_DEVICE bool contains(int h, int w) const {
      return h >= h_start && h < h_end && w >= w_start && w < w_end;
    }
  };
  CREMA_HOST_DEVICE Window At(int ph, int pw) const {
    const int h_start = ph * stride_h - pad_h, w_start = pw * stride_w - pad_w;
    const int h_end = h_start + kernel_h < height + pad_h ? h_start + kernel_h : height + pad_h;
    const int w_end = w_start + kernel_w < width + pad_w ? w_start + kernel_w : width + pad_w;
    return {h_start > 0 ? h_start : 0, h_end < height ? h_end : height, w_start > 0 ? w_start : 0,
            w_end < width ? w_end : width, (h_end - h_start) * (w_end - w_start)};
  }
  // Output value i (plane, then ph, pw): where its plane's input starts, and its window.
  CREMA_HOST_DEVICE long long InputPlaneOf(int i) const {
    return static_cast<long long>(i / (pooled_h * pooled_w)) * height * width;
  }
  CREMA_HOST_DEVICE Window WindowOf(int i) const { return At(i % (pooled_h * pooled_w) / pooled_w, i % pooled_w); }
  // The outputs along one axis whose (unclipped) windows cover input coordinate x: [*first, *last).
  CREMA_HOST_DEVICE static void Covering(int x, int pad, int kernel, int stride, int pooled, int* first, int* last) {
    *first = x + pad < kernel ? 0 : (x + pad - kernel) / stride + 1;
    const int end = (x + pad) / stride + 1;
    *last = end < pooled ? end : pooled;
  }
  // Input value i (plane, then h, x): its place in the plane, where the plane's outputs start, and the outputs
  // [ph_first, ph_last) x [pw_first, pw_last) whose windows may hold it (the backward rules gather from them).
  struct Cover {
    int within, h, x;
    long long plane_outputs;
    int ph_first, ph_last, pw_first, pw_last;
  };
  CREMA_HOST_DEVICE Cover CoverOf(int i) const {
    const int plane_size = height * width;
    Cover c;
    c.within = i % plane_size;
    c.h = c.within / width;
    c.x = c.within % width;
    c.plane_outputs = static_cast<long long>(i / plane_size) * pooled_h * pooled_w;
    Covering(c.h, pad_h, kernel_h, stride_h, pooled_h, &c.ph_first, &c.ph_last);
    Covering(c.x, pad_w, kernel_w, stride_w, pooled_w, &c.pw_first, &c.pw_last);
    return c;
  }
};

// The rules of MAX and AVE pooling on both devices (pooling.cu compiles them): forward one output value per
// call (plane, ph, pw), backward one input value per call, gathering from the outputs whose windows hold it in
// the order the outputs lie, so that both devices add the same floats in the same order.
// MAX over values of type T: floats, or 16-bit values (float16, or bfloat16 where `bfloat16`) compared as the floats
// they stand for and written as they lie (a MAX pooling's blobs the plan keeps in 16 bits on the GPU). With `relu`,
// a ReLU of slope 0 fused for training follows, with the ReLU layer's own rule (0 * value where not positive).
template <typename T>
struct MaxPoolForwardRuleOf {
  const T* input;
  T* output;
  float* argmax;
  PoolingWindows w;
  bool bfloat16 = false;
  bool relu = false;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const T* image = input + w.InputPlaneOf(i);
    const PoolingWindows::Window win = w.WindowOf(i);
    if (win.empty()) {
      // A window entirely in the padding or past the input: Caffe gives -FLT_MAX; 0, with no argmax, is a
      // value later layers can use.
      output[i] = T(0);  // 0 in either type
      argmax[i] = -1.f;
      return;
    }
    // Starting from the window's first value (not -inf) keeps the argmax inside the window even for NaNs; the
    // first of equal maxima wins.
    int best = win.h_start * w.width + win.w_start;
    float value = StoredValue(bfloat16, image[best]);
    for (int h = win.h_start; h < win.h_end; ++h) {
      for (int x = win.w_start; x < win.w_end; ++x) {
        const float v = StoredValue(bfloat16, image[h * w.width + x]);
        if (v > value) {
          value = v;
          best = h * w.width + x;
        }
      }
    }
    output[i] = image[best];
    if (relu && !(value > 0.f)) StoreValue(bfloat16, 0.f * value, &output[i]);
    argmax[i] = static_cast<float>(best);
  }
};
using MaxPoolForwardRule = MaxPoolForwardRuleOf<float>;

// AVE over values of type T, in floats: floats, or 16-bit values (float16, or bfloat16 where `bfloat16`) that an AVE
// pooling reads in GPU code computing in that type (PoolingLayer::ReadsQuantized); floats are then rounded to it first
// (`rounds`), so that a 16-bit blob and a float blob give the same sums.
template <typename T>
struct AvePoolForwardRuleOf {
  const T* input;
  float* output;
  PoolingWindows w;
  bool bfloat16 = false;
  bool rounds = false;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const T* image = input + w.InputPlaneOf(i);
    const PoolingWindows::Window win = w.WindowOf(i);
    if (win.empty()) {
      output[i] = 0.f;  // as MAX: no input pixel, a usable 0
      return;
    }
    float total = 0.f;
    for (int h = win.h_start; h < win.h_end; ++h) {
      for (int x = win.w_start; x < win.w_end; ++x) {
        const float value = StoredValue(bfloat16, image[h * w.width + x]);
        total += rounds ? RoundedToHalf(bfloat16, value) : value;
      }
    }
    output[i] = total / win.area;
  }
};
using AvePoolForwardRule = AvePoolForwardRuleOf<float>;

// STOCHASTIC, one output value per call: in TRAIN (`train`) a value of the window drawn with probability
// proportional to it, by value i of the Philox stream `key`, and its position in `source`; in TEST the
// expectation sum(x^2) / sum(x). 0, with source -1, where the window is empty or its sum is not positive (also
// NaN). The sums run in double, in the window's order.
struct StochasticPoolForwardRule {
  const float* input;
  float* output;
  float* source;
  PoolingWindows w;
  uint64_t key;
  bool train;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const float* image = input + w.InputPlaneOf(i);
    const PoolingWindows::Window win = w.WindowOf(i);
    output[i] = 0.f;  // as MAX and AVE where the window covers no input: a usable 0
    source[i] = -1.f;
    if (win.empty()) return;
    double sum = 0, squares = 0;
    for (int h = win.h_start; h < win.h_end; ++h) {
      for (int x = win.w_start; x < win.w_end; ++x) {
        sum += image[h * w.width + x];
        if (!train) squares += static_cast<double>(image[h * w.width + x]) * image[h * w.width + x];
      }
    }
    if (!(sum > 0)) return;  // nothing to pick from
    if (!train) {
      output[i] = static_cast<float>(squares / sum);
      return;
    }
    const double threshold = PhiloxUniform(key, static_cast<uint32_t>(i)) * sum;
    double running = 0;
    int last = -1;
    for (int h = win.h_start; h < win.h_end; ++h) {
      for (int x = win.w_start; x < win.w_end; ++x) {
        const int position = h * w.width + x;
        if (image[position] <= 0) continue;
        last = position;
        running += image[position];
        if (running > threshold) {
          output[i] = image[position];
          source[i] = static_cast<float>(position);
          return;
        }
      }
    }
    output[i] = image[last];  // rounding left the threshold at the very end
    source[i] = static_cast<float>(last);
  }
};

// STOCHASTIC in TEST, one input value per call: the gradient of each covering window's expectation,
// d/dx_k sum(x^2) / sum(x) = (2 x_k sum(x) - sum(x^2)) / sum(x)^2, added in the order the outputs lie.
struct StochasticPoolTestBackwardRule {
  const float* input;
  const float* top_diff;
  float* bottom_diff;
  PoolingWindows w;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const PoolingWindows::Cover c = w.CoverOf(i);
    const float* image = input + (static_cast<long long>(i) - c.within);
    float total = 0.f;
    for (int ph = c.ph_first; ph < c.ph_last; ++ph) {
      for (int pw = c.pw_first; pw < c.pw_last; ++pw) {
        const PoolingWindows::Window win = w.At(ph, pw);
        if (!win.contains(c.h, c.x)) continue;
        double sum = 0, squares = 0;
        for (int hh = win.h_start; hh < win.h_end; ++hh) {
          for (int xx = win.w_start; xx < win.w_end; ++xx) {
            sum += image[hh * w.width + xx];
            squares += static_cast<double>(image[hh * w.width + xx]) * image[hh * w.width + xx];
          }
        }
        if (!(sum > 0)) continue;
        total += static_cast<float>(top_diff[c.plane_outputs + ph * w.pooled_w + pw] *
                                    (2 * image[c.within] * sum - squares) / (sum * sum));
      }
    }
    bottom_diff[i] = total;
  }
};

// argmax == nullptr: AVE (each covering window's share, top_diff / area); else MAX, or STOCHASTIC in TRAIN
// with its sampled positions (the outputs whose argmax is this input value).
struct PoolBackwardRule {
  const float* top_diff;
  const float* argmax;
  float* bottom_diff;
  PoolingWindows w;
  CREMA_HOST_DEVICE void operator()(int i) const {
    const PoolingWindows::Cover c = w.CoverOf(i);
    float total = 0.f;
    for (int ph = c.ph_first; ph < c.ph_last; ++ph) {
      for (int pw = c.pw_first; pw < c.pw_last; ++pw) {
        const long long index = c.plane_outputs + ph * w.pooled_w + pw;
        if (argmax != nullptr) {
          if (static_cast<int>(argmax[index]) == c.within) total += top_diff[index];
        } else {
          const PoolingWindows::Window win = w.At(ph, pw);
          if (win.contains(c.h, c.x)) total += top_diff[index] / win.area;
        }
      }
    }
    bottom_diff[i] = total;
  }
};

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Pooling"; }
  // Backward reads the argmax (an internal blob, or the mask top when there is one) and, for STOCHASTIC outside
  // training, the input; never the pooled output.
  bool BackwardReadsBottom(int) const override {
    return param_.pooling_param().pool() == PoolingParameter::STOCHASTIC && phase() != TRAIN;
  }
  // (A ReLU fused for training reads the output's sign.)
  bool BackwardReadsTop(int top) const override { return top == 1 || activation_with_backward(); }
  // MAX with one top, in GPU code: forward passes 16-bit values through as they lie (the maximum of rounded values is
  // the rounded maximum), between the GPU's half-precision layers (plan_element_types); backward goes by the argmax
  // as before. cuDNN's engine runs these rules for such blobs.
  bool PassesQuantizationThrough() const override {
    return method_ == PoolingParameter::MAX && param_.top_size() == 1 && RunsGpuCode();
  }
  // AVE in GPU code computing in float16 or bf16 reads its input in that type (a ResNet's global pooling: the last
  // unit's sum may then lie in 16 bits), as the convolutions read theirs: a float input is rounded to it first, so that
  // the training is the same bit for bit either way. It sums in floats and writes floats. cuDNN's engine runs these
  // rules then.
  Quantization ReadsQuantized(int) const override { return HalfInput(ReadsHalfInGpuCode()); }
  bool ReadsHalfInGpuCode() const {
    return param_.pooling_param().pool() == PoolingParameter::AVE && RunsGpuCode() &&
           GpuCodePrecision() != Precision::kFloat32;
  }
  // Such a MAX pooling, where its layers compute in half precision, applies a ReLU of slope 0 after it in its own rule
  // (training's fusion, net/fuse.hpp: CIFAR-10's pool1 and relu1), so that its output may pass on in 16 bits.
  bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const override {
    return activation.kind == FusedActivation::kReLU && activation.alpha == 0.f && PassesQuantizationThrough() &&
           GpuCodePrecision() != Precision::kFloat32;
  }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return param_.pooling_param().pool() == PoolingParameter::MAX ? 2 : 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Caffe's output size along one axis (CEIL or FLOOR rounding; below 1 when the kernel does not fit).
  static int PooledSize(int in, int kernel, int pad, int stride, bool ceil);

 protected:
  // Every method runs its rules on the layer's device (ForwardByRules, BackwardByRules).
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // The MAX rule applies a fused ReLU (ForwardByRules).
  bool ComputesFusedActivation() const override { return method_ == PoolingParameter::MAX; }

  // Reads and checks pooling_param's window (LayerSetUp without the argmax blob; other engines share it).
  void ReadWindow();
  // Output size along one axis under round_mode.
  int OutputSize(int in, int kernel, int pad, int stride, const char* axis) const;
  using Window = PoolingWindows::Window;
  PoolingWindows windows() const {
    return {height_, width_, pooled_h_, pooled_w_, kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_};
  }
  Window WindowAt(int ph, int pw) const { return windows().At(ph, pw); }
  // Every method on the layer's device, through the rules above.
  void ForwardByRules(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void BackwardByRules(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom);

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
