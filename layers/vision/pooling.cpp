#include "layers/vision/pooling.hpp"

#include <cstdint>
#include <string>

#include "core/elementwise.hpp"
#include "layers/vision/kernel_geometry.hpp"

namespace crema {

void PoolingLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadWindow();
  if (argmax_ == nullptr) {
    if (method_ == PoolingParameter::MAX && top.size() == 1)
      argmax_ = AddInternalBlob("argmax", InternalLifetime::kUntilBackward);
    if (method_ == PoolingParameter::STOCHASTIC) argmax_ = AddInternalBlob("sample", InternalLifetime::kUntilBackward);
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
  // MAX passes its blobs' type through; AVE reading 16 bits (ReadsQuantized) writes floats.
  const bool reads_half = IsHalfType(bottom[0]->data_type()) && ReadsHalfInGpuCode();
  CREMA_CHECK(reads_half ? top[0]->data_type() == ElementType::kFloat32
                         : bottom[0]->quantization() == top[0]->quantization())
      << describe() << ": its bottom and top were planned in different element types";
}

void PoolingLayer::ForwardByRules(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const bool relu = fused_activation_.kind == FusedActivation::kReLU;  // MAX only (AppliesActivationInItsOwnPass)
  const bool bfloat16 = bottom[0]->data_type() == ElementType::kBfloat16;
  if (method_ == PoolingParameter::AVE && BottomIsHalf(*bottom[0], 0, ReadsHalfInGpuCode())) {  // ReadsQuantized
    for_each_element(context(), top[0]->count(),
                     AvePoolForwardRuleOf<uint16_t>{static_cast<const uint16_t*>(bottom[0]->bytes_on(d)),
                                                    top[0]->mutable_data_on(d), windows(), bfloat16});
    return;
  }
  if (IsHalfType(bottom[0]->data_type())) {  // MAX over 16-bit values (PassesQuantizationThrough)
    CREMA_CHECK(argmax_ != nullptr) << describe() << ": 16-bit values pool by MAX with its argmax kept";
    for_each_element(context(), top[0]->count(),
                     MaxPoolForwardRuleOf<uint16_t>{static_cast<const uint16_t*>(bottom[0]->bytes_on(d)),
                                                    static_cast<uint16_t*>(top[0]->mutable_bytes_on(d)),
                                                    argmax_->mutable_data_on(d), windows(), bfloat16, relu});
    return;
  }
  const float* input = bottom[0]->data_on(d);
  float* output = top[0]->mutable_data_on(d);
  const int count = top[0]->count();
  if (method_ == PoolingParameter::MAX) {
    float* argmax = (top.size() > 1 ? top[1] : argmax_)->mutable_data_on(d);
    for_each_element(context(), count, MaxPoolForwardRule{input, output, argmax, windows(), false, relu});
  } else if (method_ == PoolingParameter::AVE) {
    const bool rounds = ReadsHalfInGpuCode();  // floats rounded to the type the layer reads
    for_each_element(
        context(), count,
        AvePoolForwardRule{input, output, windows(), rounds && GpuCodePrecision() == Precision::kBfloat16, rounds});
  } else {
    // STOCHASTIC pooling expects non-negative inputs (after a ReLU, say): the window's values, divided by their
    // sum, are the probabilities of picking each position. The source of each output is kept (internal) for
    // backward.
    const bool train = phase() == TRAIN;
    uint64_t key = 0;
    if (train) {
      RandomStream* random = this->random();
      key = static_cast<uint64_t>(random->NextUint32()) << 32 | random->NextUint32();
    }
    for_each_element(context(), count,
                     StochasticPoolForwardRule{input, output, argmax_->mutable_data_on(d), windows(), key, train});
  }
}

void PoolingLayer::BackwardByRules(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom) {
  const Device d = device();
  const float* top_diff = top[0]->diff_on(d);
  float* bottom_diff = bottom[0]->mutable_diff_on(d);
  const int count = bottom[0]->count();
  if (method_ == PoolingParameter::STOCHASTIC && phase() != TRAIN) {
    // The output is smooth in TEST: its gradient goes to the whole window.
    for_each_element(context(), count,
                     StochasticPoolTestBackwardRule{bottom[0]->data_on(d), top_diff, bottom_diff, windows()});
    return;
  }
  // MAX's argmax, or STOCHASTIC's sampled positions in TRAIN: each output's gradient goes to its source.
  const float* source = method_ == PoolingParameter::AVE ? nullptr : (top.size() > 1 ? top[1] : argmax_)->data_on(d);
  for_each_element(context(), count, PoolBackwardRule{top_diff, source, bottom_diff, windows()});
}

void PoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRules(bottom, top);
}

void PoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardByRules(top, bottom);
}

void PoolingLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardByRules(bottom, top);
}

void PoolingLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardByRules(top, bottom);
}

}  // namespace crema
