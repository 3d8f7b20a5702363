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

void PoolingLayer::MaxPlane(const float* image, float* output, float* argmax) const {
  for (int ph = 0; ph < pooled_h_; ++ph) {
    for (int pw = 0; pw < pooled_w_; ++pw) {
      const Window win = WindowAt(ph, pw);
      const int index = ph * pooled_w_ + pw;
      if (win.h_start >= win.h_end || win.w_start >= win.w_end) {
        // A window entirely in the padding or past the input: Caffe gives -FLT_MAX; 0, with no argmax, is a
        // value later layers can use.
        output[index] = 0.f;
        argmax[index] = -1.f;
        continue;
      }
      // Starting from the window's first value (not -inf) keeps the argmax inside the window even for NaNs.
      int best = win.h_start * width_ + win.w_start;
      float value = image[best];
      for (int h = win.h_start; h < win.h_end; ++h) {
        const float* line = image + h * width_;
        for (int w = win.w_start; w < win.w_end; ++w) {
          if (line[w] > value) {
            value = line[w];
            best = h * width_ + w;
          }
        }
      }
      output[index] = value;
      argmax[index] = static_cast<float>(best);
    }
  }
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

void PoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* input = bottom[0]->cpu_data();
  float* output = top[0]->mutable_cpu_data();
  const bool max = method_ == PoolingParameter::MAX;
  const bool stochastic = method_ == PoolingParameter::STOCHASTIC;
  const bool sampled = stochastic && phase() == TRAIN;
  // Where each output came from: MAX's argmax (a top or internal), STOCHASTIC's sample (internal).
  float* argmax =
      max || stochastic ? (top.size() > 1 ? top[1]->mutable_cpu_data() : argmax_->mutable_cpu_data()) : nullptr;
  const int planes = bottom[0]->count(0, 2);
  const int plane_size = height_ * width_;
  const int pooled_size = pooled_h_ * pooled_w_;
  // Planes are independent: each thread writes only its own outputs. Samples are drawn in order from the layer's
  // one random stream, so that pass runs on one thread.
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold() && !sampled) schedule(static)
  for (int plane = 0; plane < planes; ++plane) {
    const float* image = input + plane * plane_size;
    if (max) {
      MaxPlane(image, output + plane * pooled_size, argmax + plane * pooled_size);
      continue;
    }
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const int index = plane * pooled_size + ph * pooled_w_ + pw;
        const Window win = WindowAt(ph, pw);
        if (win.h_start >= win.h_end || win.w_start >= win.w_end) {
          // A window entirely in the padding or past the input: Caffe gives -FLT_MAX (MAX) or a division by
          // the padded area; 0, with no argmax, is a value later layers can use.
          output[index] = 0.f;
          if (argmax != nullptr) argmax[index] = -1.f;
          continue;
        }
        if (stochastic) {
          output[index] = sampled ? Sample(image, win, &argmax[index]) : ProbabilityWeighted(image, win);
          if (!sampled) argmax[index] = -1.f;
        } else {
          float sum = 0.f;
          for (int h = win.h_start; h < win.h_end; ++h)
            for (int w = win.w_start; w < win.w_end; ++w) sum += image[h * width_ + w];
          output[index] = sum / win.area;
        }
      }
    }
  }
}

void PoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* input_diff = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), 0.f, input_diff);
  const bool max = method_ == PoolingParameter::MAX;
  const bool stochastic = method_ == PoolingParameter::STOCHASTIC;
  // MAX and STOCHASTIC in TRAIN send each output's gradient to its source; STOCHASTIC in TEST has a smooth
  // output whose gradient goes to the whole window.
  const bool routed = max || (stochastic && phase() == TRAIN);
  const float* argmax = !routed ? nullptr : top.size() > 1 ? top[1]->cpu_data() : argmax_->cpu_data();
  const int planes = bottom[0]->count(0, 2);
  const int plane_size = height_ * width_;
  const int pooled_size = pooled_h_ * pooled_w_;
#pragma omp parallel for if (top[0]->count() >= ParallelElementThreshold()) schedule(static)
  for (int plane = 0; plane < planes; ++plane) {
    float* image_diff = input_diff + plane * plane_size;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const int index = plane * pooled_size + ph * pooled_w_ + pw;
        if (routed) {
          const int source = static_cast<int>(argmax[index]);
          if (source >= 0) image_diff[source] += top_diff[index];
          continue;
        }
        const Window win = WindowAt(ph, pw);
        if (win.h_start >= win.h_end || win.w_start >= win.w_end) continue;
        if (stochastic) {
          ProbabilityWeightedGradient(bottom[0]->cpu_data() + plane * plane_size, win, top_diff[index], image_diff);
          continue;
        }
        const float share = top_diff[index] / win.area;
        for (int h = win.h_start; h < win.h_end; ++h)
          for (int w = win.w_start; w < win.w_end; ++w) image_diff[h * width_ + w] += share;
      }
    }
  }
}

}  // namespace crema
