#include "layers/vision/base_convolution.hpp"

#include <glog/logging.h>

#include <string>

#include "core/filler.hpp"
#include "core/im2col.hpp"
#include "core/math_functions.hpp"

namespace crema {

void BaseConvolutionLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ConvolutionParameter& param = param_.convolution_param();
  const std::string me = describe();
  const Blob& input = *bottom[0];
  channel_axis_ = CanonicalAxis(input, param.axis(), "convolution_param.axis");
  num_spatial_axes_ = input.num_axes() - channel_axis_ - 1;
  CREMA_CHECK(num_spatial_axes_ >= 1) << me << ": needs at least one spatial axis after the channel axis "
                                      << channel_axis_ << ", but the input has shape " << input.shape_string();
  geometry_ = ConvolutionGeometry(param, num_spatial_axes_, me);
  use_2d_ = num_spatial_axes_ == 2 && !param.force_nd_im2col();

  num_output_ = static_cast<int>(param.num_output());
  CREMA_CHECK(num_output_ > 0) << me << ": num_output must be given and positive";
  group_ = static_cast<int>(param.group());
  channels_ = input.shape(channel_axis_);
  CREMA_CHECK(group_ > 0) << me << ": group must be positive";
  CREMA_CHECK(channels_ % group_ == 0) << me << ": group " << group_ << " must divide the input channels " << channels_
                                       << " (input shape " << input.shape_string() << ")";
  CREMA_CHECK(num_output_ % group_ == 0) << me << ": group " << group_ << " must divide num_output " << num_output_;
  bias_term_ = param.bias_term();
  conv_in_channels_ = reverse_dimensions() ? num_output_ : channels_;
  conv_out_channels_ = reverse_dimensions() ? channels_ : num_output_;

  std::vector<int> weight_shape = {conv_out_channels_, conv_in_channels_ / group_};
  weight_shape.insert(weight_shape.end(), geometry_.kernel.begin(), geometry_.kernel.end());
  std::vector<std::vector<int>> shapes = {weight_shape};
  if (bias_term_) shapes.push_back({num_output_});
  if (!params_.empty()) {
    AdoptStoredParameters(shapes, {"weights", "bias"});
    return;
  }
  params_.push_back(std::make_shared<Blob>(weight_shape));
  Fill(param.weight_filler(), params_[0].get(), random());
  if (bias_term_) {
    params_.push_back(std::make_shared<Blob>(shapes[1]));
    Fill(param.bias_filler(), params_[1].get(), random());
  }
}

void BaseConvolutionLayer::AbsorbChannelAffine(const std::vector<float>& scale, const std::vector<float>& shift) {
  CREMA_CHECK(AbsorbsChannelAffine() && bias_term_ && scale.size() == static_cast<size_t>(num_output_) &&
              shift.size() == scale.size())
      << describe() << ": a scale and shift of " << scale.size() << " channels cannot fold into " << num_output_
      << " outputs";
  // The weights are (conv_out_channels, conv_in_channels / group, kernel...): a convolution's output channel is
  // the first axis; a deconvolution's is the second, within the group of the first (its input channel).
  float* weights = params_[0]->mutable_cpu_data();
  const int kernel = params_[0]->count(2);
  const int rows = params_[0]->shape(0), columns = params_[0]->shape(1);
  for (int row = 0; row < rows; ++row) {
    for (int column = 0; column < columns; ++column) {
      const int output = reverse_dimensions() ? row / (rows / group_) * columns + column : row;
      float* tap = weights + (static_cast<size_t>(row) * columns + column) * kernel;
      for (int k = 0; k < kernel; ++k) tap[k] *= scale[output];
    }
  }
  float* bias = params_[1]->mutable_cpu_data();
  for (int c = 0; c < num_output_; ++c) bias[c] = bias[c] * scale[c] + shift[c];
}

int BaseConvolutionLayer::OutputSize(int axis, int in, const Blob& input) {
  const int pad = geometry_.pad[axis], extent = geometry_.extent(axis);
  if (reverse_dimensions()) {
    const int out = geometry_.stride[axis] * (in - 1) + extent - 2 * pad;
    CREMA_CHECK(out >= 1) << describe() << ": pad " << pad << " along spatial axis " << axis
                          << " removes the whole output (stride " << geometry_.stride[axis] << " x (" << in
                          << " - 1) + kernel extent " << extent << " - 2 * pad = " << out << "); input shape "
                          << input.shape_string();
    return out;
  }
  const int stride = geometry_.stride[axis], span = in + 2 * pad - extent;
  // Caffe's rule, span / stride + 1 with the division truncating toward zero, gives one output where the kernel
  // reaches past the padded input by less than a stride; the taps outside read as zero.
  CREMA_CHECK(span > -stride) << describe() << ": kernel_size " << geometry_.kernel[axis] << " with dilation "
                              << geometry_.dilation[axis] << " spans " << extent
                              << " positions, more than the padded input along spatial axis " << axis << " (" << in
                              << " + 2 * pad " << pad << ") by stride " << stride << " or more; input shape "
                              << input.shape_string() << ", so the output would be empty";
  if (span < 0 && !warned_kernel_beyond_input_) {
    warned_kernel_beyond_input_ = true;
    LOG(WARNING) << describe() << ": kernel_size " << geometry_.kernel[axis] << " with dilation "
                 << geometry_.dilation[axis] << " spans " << extent << " positions, more than the padded input "
                 << "along spatial axis " << axis << " (" << in << " + 2 * pad " << pad << "; input shape "
                 << input.shape_string() << "): one output position, the taps beyond the input read as zero, as "
                 << "Caffe does";
  }
  return span / stride + 1;
}

void BaseConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string me = describe();
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() == channel_axis_ + 1 + num_spatial_axes_)
      << me << ": input shape " << input.shape_string() << " has " << input.num_axes() << " axes, but the "
      << "layer was set up for " << channel_axis_ + 1 + num_spatial_axes_;
  CREMA_CHECK(input.shape(channel_axis_) == channels_)
      << me << ": input shape " << input.shape_string() << " has " << input.shape(channel_axis_)
      << " channels, but the weights expect " << channels_;
  for (size_t i = 1; i < bottom.size(); ++i) {
    CREMA_CHECK(bottom[i]->shape() == input.shape())
        << me << ": all bottoms must have the same shape, but bottom 0 is " << input.shape_string() << " and bottom "
        << i << " is " << bottom[i]->shape_string();
  }
  num_ = input.count(0, channel_axis_);
  num_bottoms_ = static_cast<int>(bottom.size());
  bottom_dim_ = input.count(channel_axis_);
  std::vector<int> top_shape(input.shape().begin(), input.shape().begin() + channel_axis_);
  top_shape.push_back(num_output_);
  std::vector<int> bottom_spatial, top_spatial;
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int in = input.shape(channel_axis_ + 1 + i);
    bottom_spatial.push_back(in);
    top_spatial.push_back(OutputSize(i, in, input));
    top_shape.push_back(top_spatial.back());
  }
  for (Blob* output : top) output->Reshape(top_shape);
  top_dim_ = top[0]->count(channel_axis_);
  half_tops_ = AnyHalfTop(top);
  top_spatial_size_ = top[0]->count(channel_axis_ + 1);

  // The convolution runs from its input (the bottom, or the top when reversed) to its output.
  const std::vector<int>& input_spatial = reverse_dimensions() ? top_spatial : bottom_spatial;
  conv_output_spatial_ = reverse_dimensions() ? bottom_spatial : top_spatial;
  conv_input_shape_ = {conv_in_channels_};
  conv_input_shape_.insert(conv_input_shape_.end(), input_spatial.begin(), input_spatial.end());
  column_shape_ = {conv_in_channels_};
  conv_output_spatial_size_ = 1;
  for (int i = 0; i < num_spatial_axes_; ++i) {
    column_shape_[0] *= geometry_.kernel[i];
    column_shape_.push_back(conv_output_spatial_[i]);
    conv_output_spatial_size_ *= conv_output_spatial_[i];
  }
  kernel_dim_ = column_shape_[0] / group_;
}

size_t BaseConvolutionLayer::column_floats() const {
  return geometry_.pointwise() ? 0 : static_cast<size_t>(column_shape_[0]) * conv_output_spatial_size_;
}

UnrollGeometry BaseConvolutionLayer::unroll_geometry(size_t row_stride) const {
  const KernelGeometry& g = geometry_;
  return MakeUnrollGeometry(num_spatial_axes_, conv_input_shape_.data(), column_shape_.data(), g.kernel.data(),
                            g.pad.data(), g.stride.data(), g.dilation.data(), row_stride, use_2d_);
}

void BaseConvolutionLayer::Unroll(const float* image, float* columns, size_t row_stride) const {
  im2col(context(), image, unroll_geometry(row_stride), columns);
}

void BaseConvolutionLayer::Fold(const float* columns, float* image, size_t row_stride) const {
  col2im(context(), columns, unroll_geometry(row_stride), image);
}

// One product of the weights with one image's columns: 2 * outputs * (rows per group) * positions.
double BaseConvolutionLayer::ForwardFlops() const {
  const double product = 2.0 * conv_out_channels_ * kernel_dim_ * conv_output_spatial_size_;
  const double bias = bias_term_ ? static_cast<double>(num_output_) * top_spatial_size_ : 0.0;
  return static_cast<double>(num_bottoms_) * num_ * (product + bias);
}

// The weight gradient is one such product, each input gradient another; the bias gradient a sum.
double BaseConvolutionLayer::BackwardFlops(const std::vector<bool>& propagate_down) const {
  const double product = 2.0 * conv_out_channels_ * kernel_dim_ * conv_output_spatial_size_;
  double flops = 0;
  for (size_t b = 0; b < propagate_down.size(); ++b) {
    if (param_propagate_down(0)) flops += product;
    if (bias_term_ && param_propagate_down(1)) flops += static_cast<double>(num_output_) * top_spatial_size_;
    if (propagate_down[b]) flops += product;
  }
  return flops * num_;
}

size_t BaseConvolutionLayer::PlanImageProducts() {
  half_ = GpuCodePrecision();
  if (half_ == Precision::kFloat32) return column_floats();
  const auto aligned = [](size_t floats) { return (floats + 63) / 64 * 64; };  // 256 bytes
  const auto halves = [](size_t values) { return (values + 1) / 2; };          // in floats
  const size_t columns = static_cast<size_t>(column_shape_[0]) * conv_output_spatial_size_;
  const size_t output_image = static_cast<size_t>(conv_out_channels_) * conv_output_spatial_size_;
  const size_t input_image = static_cast<size_t>(reverse_dimensions() ? top_dim_ : bottom_dim_);
  half_columns_offset_ = aligned(column_floats());
  half_output_offset_ = aligned(half_columns_offset_ + halves(columns));
  half_input_offset_ = aligned(half_output_offset_ + halves(output_image));
  float_top_offset_ = aligned(half_input_offset_ + halves(input_image));
  return float_top_offset_ + (half_tops_ ? static_cast<size_t>(top_dim_) : 0);
}

std::string BaseConvolutionLayer::engine_note() const {
  return half_ == Precision::kFloat32 ? "" : std::string(PrecisionName(half_)) + " on the tensor cores";
}

const uint16_t* BaseConvolutionLayer::HalfWeights() { return half_weights_.Of(context(), half_, *params_[0]); }

uint16_t* BaseConvolutionLayer::HalfScratch(size_t offset) { return reinterpret_cast<uint16_t*>(workspace() + offset); }

const uint16_t* BaseConvolutionLayer::HalfColumnsOf(const float* image) {
  uint16_t* rounded = HalfScratch(half_input_offset_);
  RoundToHalf(context(), half_, reverse_dimensions() ? top_dim_ : bottom_dim_, image, rounded);
  return HalfColumnsOf(rounded);
}

const uint16_t* BaseConvolutionLayer::HalfColumnsOf(const uint16_t* image) {
  if (geometry_.pointwise()) return image;
  uint16_t* columns = HalfScratch(half_columns_offset_);
  im2col(context(), image, unroll_geometry(0), columns);
  return columns;
}

const uint16_t* BaseConvolutionLayer::HalfOutputImageOf(const float* output_diff) {
  uint16_t* rounded = HalfScratch(half_output_offset_);
  RoundToHalf(context(), half_, conv_out_channels_ * conv_output_spatial_size_, output_diff, rounded);
  return rounded;
}

void BaseConvolutionLayer::HalfForwardGemm(const uint16_t* columns, float* output) {
  const int group_outputs = conv_out_channels_ / group_;
  const uint16_t* weights = HalfWeights();
  for (int g = 0; g < group_; ++g) {
    HalfGemm(context(), half_, Transpose::kNo, Transpose::kNo, group_outputs, conv_output_spatial_size_, kernel_dim_,
             1.f, weights + g * group_outputs * kernel_dim_, columns + g * kernel_dim_ * conv_output_spatial_size_, 0.f,
             output + g * group_outputs * conv_output_spatial_size_);
  }
}

void BaseConvolutionLayer::HalfBackwardData(const uint16_t* output_diff, float* input_diff) {
  // For pointwise kernels the column gradient is the input gradient itself.
  float* column_diff = geometry_.pointwise() ? input_diff : workspace();
  const int group_outputs = conv_out_channels_ / group_;
  const uint16_t* weights = HalfWeights();
  for (int g = 0; g < group_; ++g) {
    HalfGemm(context(), half_, Transpose::kYes, Transpose::kNo, kernel_dim_, conv_output_spatial_size_, group_outputs,
             1.f, weights + g * group_outputs * kernel_dim_,
             output_diff + g * group_outputs * conv_output_spatial_size_, 0.f,
             column_diff + g * kernel_dim_ * conv_output_spatial_size_);
  }
  if (!geometry_.pointwise()) Fold(column_diff, input_diff);
}

void BaseConvolutionLayer::HalfWeightGemm(const uint16_t* columns, const uint16_t* output_diff, float* weight_diff) {
  const int group_outputs = conv_out_channels_ / group_;
  for (int g = 0; g < group_; ++g) {
    HalfGemm(context(), half_, Transpose::kNo, Transpose::kYes, group_outputs, kernel_dim_, conv_output_spatial_size_,
             1.f, output_diff + g * group_outputs * conv_output_spatial_size_,
             columns + g * kernel_dim_ * conv_output_spatial_size_, 1.f, weight_diff + g * group_outputs * kernel_dim_);
  }
}

const float* BaseConvolutionLayer::ColumnsOf(const float* input) {
  if (geometry_.pointwise()) return input;
  float* columns = workspace();
  Unroll(input, columns);
  return columns;
}

// Group g multiplies rows [g * out/group, (g+1) * out/group) of the weights with its slice of the columns.
void BaseConvolutionLayer::ForwardGemm(const float* input, const float* weights, float* output) {
  const float* columns = ColumnsOf(input);
  const int group_outputs = conv_out_channels_ / group_;
  for (int g = 0; g < group_; ++g) {
    gemm(context(), Transpose::kNo, Transpose::kNo, group_outputs, conv_output_spatial_size_, kernel_dim_, 1.f,
         weights + g * group_outputs * kernel_dim_, columns + g * kernel_dim_ * conv_output_spatial_size_, 0.f,
         output + g * group_outputs * conv_output_spatial_size_);
  }
}

void BaseConvolutionLayer::BackwardData(const float* output_diff, const float* weights, float* input_diff) {
  // For pointwise kernels the column gradient is the input gradient itself.
  float* column_diff = geometry_.pointwise() ? input_diff : workspace();
  const int group_outputs = conv_out_channels_ / group_;
  for (int g = 0; g < group_; ++g) {
    gemm(context(), Transpose::kYes, Transpose::kNo, kernel_dim_, conv_output_spatial_size_, group_outputs, 1.f,
         weights + g * group_outputs * kernel_dim_, output_diff + g * group_outputs * conv_output_spatial_size_, 0.f,
         column_diff + g * kernel_dim_ * conv_output_spatial_size_);
  }
  if (!geometry_.pointwise()) Fold(column_diff, input_diff);
}

void BaseConvolutionLayer::WeightGemm(const float* input, const float* output_diff, float* weight_diff) {
  const float* columns = ColumnsOf(input);
  const int group_outputs = conv_out_channels_ / group_;
  for (int g = 0; g < group_; ++g) {
    gemm(context(), Transpose::kNo, Transpose::kYes, group_outputs, kernel_dim_, conv_output_spatial_size_, 1.f,
         output_diff + g * group_outputs * conv_output_spatial_size_,
         columns + g * kernel_dim_ * conv_output_spatial_size_, 1.f, weight_diff + g * group_outputs * kernel_dim_);
  }
}

void BaseConvolutionLayer::AddBias(float* output, const float* bias) {
  gemm(context(), Transpose::kNo, Transpose::kNo, num_output_, top_spatial_size_, 1, 1.f, bias,
       context().ones(top_spatial_size_), 1.f, output);
}

void BaseConvolutionLayer::BiasGradient(const float* output_diff, float* bias_diff) {
  gemv(context(), Transpose::kNo, num_output_, top_spatial_size_, 1.f, output_diff, context().ones(top_spatial_size_),
       1.f, bias_diff);
}

// Images run one after another: the matrix products use the BLAS's own threads, and an OpenMP loop over the
// batch around them would fight those threads for the cores (with the pthread OpenBLAS, measured several
// times slower on a 2-core machine).
void BaseConvolutionLayer::ForwardImages(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (half_ != Precision::kFloat32) {
    HalfForwardImages(bottom, top);
    return;
  }
  const Device d = device();
  const float* weights = params_[0]->data_on(d);
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->data_on(d);
    float* output = top[b]->mutable_data_on(d);
    for (int n = 0; n < num_; ++n) {
      // Deconvolution's forward is the convolution's input gradient, from its top to its bottom.
      if (reverse_dimensions())
        BackwardData(input + n * bottom_dim_, weights, output + n * top_dim_);
      else
        ForwardGemm(input + n * bottom_dim_, weights, output + n * top_dim_);
      if (bias_term_) AddBias(output + n * top_dim_, params_[1]->data_on(d));
    }
  }
}

void BaseConvolutionLayer::BackwardImages(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                          const std::vector<Blob*>& bottom) {
  if (half_ != Precision::kFloat32) {
    HalfBackwardImages(top, propagate_down, bottom);
    return;
  }
  const Device d = device();
  const float* weights = params_[0]->data_on(d);
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const bool reversed = reverse_dimensions();
  for (size_t b = 0; b < top.size(); ++b) {
    const float* bottom_data = bottom[b]->data_on(d);
    const float* top_diff = top[b]->diff_on(d);
    for (int n = 0; n < num_; ++n) {
      const float* image = bottom_data + n * bottom_dim_;
      const float* image_top_diff = top_diff + n * top_dim_;
      if (bias_grad) BiasGradient(image_top_diff, params_[1]->mutable_diff_on(d));
      // Deconvolution: the convolution's input is the top, and its output the bottom.
      const float* conv_input = reversed ? image_top_diff : image;
      const float* conv_output_diff = reversed ? image : image_top_diff;
      if (weight_grad) WeightGemm(conv_input, conv_output_diff, params_[0]->mutable_diff_on(d));
      if (propagate_down[b]) {
        float* image_bottom_diff = bottom[b]->mutable_diff_on(d) + n * bottom_dim_;
        if (reversed)
          ForwardGemm(image_top_diff, weights, image_bottom_diff);
        else
          BackwardData(image_top_diff, weights, image_bottom_diff);
      }
    }
  }
}

// Image n of a bottom as 16-bit values: its own where the plan keeps it so, else rounded (as columns for the
// convolution's input, as an image where the bottom is the convolution's output, the Deconvolution's).
const uint16_t* BaseConvolutionLayer::HalfBottomColumns(const Blob& bottom, int n) {
  return HalfColumnsOf(HalfValuesOf(context(), half_, bottom, static_cast<size_t>(n) * bottom_dim_, bottom_dim_,
                                    HalfScratch(half_input_offset_)));
}

const uint16_t* BaseConvolutionLayer::HalfBottomImage(const Blob& bottom, int n) {
  return HalfValuesOf(context(), half_, bottom, static_cast<size_t>(n) * bottom_dim_, bottom_dim_,
                      HalfScratch(half_output_offset_));
}

// The Deconvolution's convolution runs from its top to its bottom: its forward is the input gradient of the bottom's
// image.
void BaseConvolutionLayer::HalfForwardImages(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const HalfTopFinish finish =
      HalfTopFinishOf(bias_term_ ? params_[1]->data_on(d) : nullptr, top_spatial_size_, num_output_);
  for (size_t b = 0; b < bottom.size(); ++b) {
    const bool half_out = IsHalfType(top[b]->data_type());
    auto* out16 = half_out ? static_cast<uint16_t*>(top[b]->mutable_bytes_on(d)) : nullptr;
    float* out = half_out ? nullptr : top[b]->mutable_data_on(d);
    for (int n = 0; n < num_; ++n) {
      float* output = half_out ? workspace() + float_top_offset_ : out + static_cast<size_t>(n) * top_dim_;
      if (reverse_dimensions())
        HalfBackwardData(HalfBottomImage(*bottom[b], n), output);
      else
        HalfForwardGemm(HalfBottomColumns(*bottom[b], n), output);
      if (half_out)
        HalfTop(context(), half_, top_dim_, output, finish, out16 + static_cast<size_t>(n) * top_dim_);
      else if (bias_term_)
        AddBias(output, params_[1]->data_on(d));
    }
  }
  if (half_tops_) FinishFloatTops(top);
}

void BaseConvolutionLayer::HalfBackwardImages(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                              const std::vector<Blob*>& bottom) {
  const Device d = device();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const bool reversed = reverse_dimensions();
  for (size_t b = 0; b < top.size(); ++b) {
    const float* top_diff = top[b]->diff_on(d);
    for (int n = 0; n < num_; ++n) {
      const float* image_top_diff = top_diff + static_cast<size_t>(n) * top_dim_;
      if (bias_grad) BiasGradient(image_top_diff, params_[1]->mutable_diff_on(d));
      if (weight_grad) {
        // The convolution's input and output gradient: the bottom and the top's gradient, or for Deconvolution the
        // top's gradient and the bottom.
        const uint16_t* columns = reversed ? HalfColumnsOf(image_top_diff) : HalfBottomColumns(*bottom[b], n);
        const uint16_t* output_diff = reversed ? HalfBottomImage(*bottom[b], n) : HalfOutputImageOf(image_top_diff);
        HalfWeightGemm(columns, output_diff, params_[0]->mutable_diff_on(d));
      }
      if (propagate_down[b]) {
        float* image_bottom_diff = bottom[b]->mutable_diff_on(d) + static_cast<size_t>(n) * bottom_dim_;
        if (reversed)
          HalfForwardGemm(HalfColumnsOf(image_top_diff), image_bottom_diff);
        else
          HalfBackwardData(HalfOutputImageOf(image_top_diff), image_bottom_diff);
      }
    }
  }
}

}  // namespace crema
