#include "layers/pooling.hpp"

#include <algorithm>
#include <string>

#include "core/elementwise.hpp"
#include "core/math_functions.hpp"
#include "layers/kernel_geometry.hpp"

namespace crema {

void PoolingLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadWindow();
  if (argmax_ == nullptr) {
    if (method_ == PoolingParameter::MAX && top.size() == 1) argmax_ = AddInternalBlob("argmax");
    if (method_ == PoolingParameter::STOCHASTIC) argmax_ = AddInternalBlob("sample");
  }
}

void PoolingLayer::ReadWindow() {
  const PoolingParameter& param = param_.pooling_param();
  const std::string me = describe();
  method_ = param.pool();
  global_ = param.global_pooling();
  const KernelGeometry window = PoolingGeometry(param, me);
  kernel_h_ = window.kernel[0];
  kernel_w_ = window.kernel[1];
  stride_h_ = window.stride[0];
  stride_w_ = window.stride[1];
  pad_h_ = window.pad[0];
  pad_w_ = window.pad[1];
  if (global_) {
    CREMA_CHECK(pad_h_ == 0 && pad_w_ == 0 && stride_h_ == 1 && stride_w_ == 1)
        << me << ": global_pooling needs pad 0 and stride 1, got pad " << pad_h_ << " x " << pad_w_ << " and stride "
        << stride_h_ << " x " << stride_w_;
  } else {
    // A window lying wholly in the padding would pool nothing.
    CREMA_CHECK(pad_h_ < kernel_h_ && pad_w_ < kernel_w_)
        << me << ": pad (" << pad_h_ << " x " << pad_w_ << ") must be smaller than kernel_size (" << kernel_h_ << " x "
        << kernel_w_ << ")";
  }
}

int PoolingLayer::PooledSize(int in, int kernel, int pad, int stride, bool ceil) {
  const int span = in + 2 * pad - kernel;
  if (!ceil) return span >= 0 ? span / stride + 1 : 0;
  // Integer division truncates towards zero, which is the ceiling for a negative span: like Caffe, a kernel
  // slightly larger than the padded input still gives one window.
  int out = (span >= 0 ? (span + stride - 1) / stride : span / stride) + 1;
  // Rounding up may add a window that starts beyond the padded input; Caffe drops it only when pad > 0,
  // and the output shape must be Caffe's (later layers' stored weights depend on it). A window that still
  // covers no input pixel yields 0 (see Forward_cpu).
  if (pad > 0 && (out - 1) * stride >= in + pad) --out;
  return out;
}

int PoolingLayer::OutputSize(int in, int kernel, int pad, int stride, const char* axis) const {
  const int out = PooledSize(in, kernel, pad, stride, param_.pooling_param().round_mode() == PoolingParameter::CEIL);
  CREMA_CHECK(out >= 1) << describe() << ": kernel_size " << kernel << " is larger than the " << axis
                        << " of the padded input (" << in << " + 2 * pad " << pad << "), so the output would be empty";
  return out;
}

void PoolingLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() == 4) << describe() << ": takes 4-d input (N, C, H, W), but the input has shape "
                                     << input.shape_string();
  height_ = input.shape(2);
  width_ = input.shape(3);
  if (global_) {
    kernel_h_ = height_;
    kernel_w_ = width_;
  }
  pooled_h_ = OutputSize(height_, kernel_h_, pad_h_, stride_h_, "height");
  pooled_w_ = OutputSize(width_, kernel_w_, pad_w_, stride_w_, "width");
  const std::vector<int> shape = {input.shape(0), input.shape(1), pooled_h_, pooled_w_};
  for (Blob* output : top) output->Reshape(shape);
  if (argmax_ != nullptr) argmax_->Reshape(shape);
}

// STOCHASTIC pooling expects non-negative inputs (after a ReLU, say): the window's values, divided by their sum,
// are the probabilities of picking each position.
float PoolingLayer::Sample(const float* image, const Window& win, float* source) {
  double sum = 0;
  for (int h = win.h_start; h < win.h_end; ++h)
    for (int w = win.w_start; w < win.w_end; ++w) sum += image[h * width_ + w];
  *source = -1.f;
  if (!(sum > 0)) return 0.f;  // nothing to pick from (also for NaN sums)
  const double threshold = random()->Uniform(0.f, 1.f) * sum;
  double running = 0;
  int last = -1;
  for (int h = win.h_start; h < win.h_end; ++h) {
    for (int w = win.w_start; w < win.w_end; ++w) {
      const int position = h * width_ + w;
      if (image[position] <= 0) continue;
      last = position;
      running += image[position];
      if (running > threshold) {
        *source = static_cast<float>(position);
        return image[position];
      }
    }
  }
  *source = static_cast<float>(last);  // rounding left the threshold at the very end
  return image[last];
}

// At test time the expected value of the sample: sum(x^2) / sum(x) over the window (0 when the sum is not
// positive).
float PoolingLayer::ProbabilityWeighted(const float* image, const Window& win) const {
  double sum = 0, squares = 0;
  for (int h = win.h_start; h < win.h_end; ++h) {
    for (int w = win.w_start; w < win.w_end; ++w) {
      sum += image[h * width_ + w];
      squares += static_cast<double>(image[h * width_ + w]) * image[h * width_ + w];
    }
  }
  return sum > 0 ? static_cast<float>(squares / sum) : 0.f;
}

// d/dx_i of sum(x^2) / sum(x) = (2 x_i sum(x) - sum(x^2)) / sum(x)^2.
void PoolingLayer::ProbabilityWeightedGradient(const float* image, const Window& win, float top_diff,
                                               float* image_diff) const {
  double sum = 0, squares = 0;
  for (int h = win.h_start; h < win.h_end; ++h) {
    for (int w = win.w_start; w < win.w_end; ++w) {
      sum += image[h * width_ + w];
      squares += static_cast<double>(image[h * width_ + w]) * image[h * width_ + w];
    }
  }
  if (!(sum > 0)) return;
  for (int h = win.h_start; h < win.h_end; ++h)
    for (int w = win.w_start; w < win.w_end; ++w)
      image_diff[h * width_ + w] +=
          static_cast<float>(top_diff * (2 * image[h * width_ + w] * sum - squares) / (sum * sum));
}

std::string PoolingLayer::Refusal(const EngineQuery& query) {
  if (query.device == Device::kGPU && query.param.pooling_param().pool() == PoolingParameter::STOCHASTIC)
    return "STOCHASTIC pooling draws its samples in order on the host";
  return "";
}

void PoolingLayer::ForwardByRules(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const float* input = bottom[0]->data_on(d);
  float* output = top[0]->mutable_data_on(d);
  const int count = top[0]->count();
  if (method_ == PoolingParameter::MAX) {
    float* argmax = (top.size() > 1 ? top[1] : argmax_)->mutable_data_on(d);
    for_each_element(context(), count, MaxPoolForwardRule{input, output, argmax, windows()});
  } else {
    for_each_element(context(), count, AvePoolForwardRule{input, output, windows()});
  }
}

void PoolingLayer::BackwardByRules(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* argmax = method_ == PoolingParameter::MAX ? (top.size() > 1 ? top[1] : argmax_)->data_on(d) : nullptr;
  for_each_element(context(), bottom[0]->count(),
                   PoolBackwardRule{top[0]->diff_on(d), argmax, bottom[0]->mutable_diff_on(d), windows()});
}

void PoolingLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRules(bottom, top);
}

void PoolingLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardByRules(top, bottom);
}

void PoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (method_ != PoolingParameter::STOCHASTIC) {
    ForwardByRules(bottom, top);
    return;
  }
  // STOCHASTIC: the source of each output is kept (internal) for backward.
  const float* input = bottom[0]->cpu_data();
  float* output = top[0]->mutable_cpu_data();
  float* source = argmax_->mutable_cpu_data();
  const bool sampled = phase() == TRAIN;
  const int planes = bottom[0]->count(0, 2);
  const int plane_size = height_ * width_;
  const int pooled_size = pooled_h_ * pooled_w_;
  // Planes are independent: each thread writes only its own outputs. Samples are drawn in order from the layer's
  // one random stream, so that pass runs on one thread.
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold() && !sampled) schedule(static)
  for (int plane = 0; plane < planes; ++plane) {
    const float* image = input + plane * plane_size;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const int index = plane * pooled_size + ph * pooled_w_ + pw;
        const Window win = WindowAt(ph, pw);
        source[index] = -1.f;
        if (win.empty()) {
          output[index] = 0.f;  // as MAX and AVE: no input pixel, a usable 0
          continue;
        }
        output[index] = sampled ? Sample(image, win, &source[index]) : ProbabilityWeighted(image, win);
      }
    }
  }
}

void PoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  if (method_ != PoolingParameter::STOCHASTIC) {
    BackwardByRules(top, bottom);
    return;
  }
  const float* top_diff = top[0]->cpu_diff();
  float* input_diff = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), 0.f, input_diff);
  // In TRAIN each output's gradient goes to its sampled source; in TEST the output is smooth and its gradient
  // goes to the whole window.
  const float* source = phase() == TRAIN ? argmax_->cpu_data() : nullptr;
  const int planes = bottom[0]->count(0, 2);
  const int plane_size = height_ * width_;
  const int pooled_size = pooled_h_ * pooled_w_;
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold()) schedule(static)
  for (int plane = 0; plane < planes; ++plane) {
    float* image_diff = input_diff + plane * plane_size;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const int index = plane * pooled_size + ph * pooled_w_ + pw;
        if (source != nullptr) {
          const int position = static_cast<int>(source[index]);
          if (position >= 0) image_diff[position] += top_diff[index];
          continue;
        }
        const Window win = WindowAt(ph, pw);
        if (win.empty()) continue;
        ProbabilityWeightedGradient(bottom[0]->cpu_data() + plane * plane_size, win, top_diff[index], image_diff);
      }
    }
  }
}

}  // namespace crema
