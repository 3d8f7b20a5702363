#include "layers/convolution.hpp"

#include <string>

#include "core/filler.hpp"
#include "core/im2col.hpp"
#include "core/math_functions.hpp"

namespace crema {

namespace {

// A per-spatial-axis setting: the 2-d pair (`pair_fields`) when given, else the repeated `field` with one
// value for every axis or one per axis, else `fallback` for every axis (a negative fallback: required).
template <typename Repeated>
std::vector<int> SpatialSetting(const std::string& layer, const char* field, const Repeated& values,
                                const char* pair_fields, bool has_pair, uint32_t h, uint32_t w, int axes,
                                int fallback) {
  const int given = values.size();
  if (has_pair) {
    CREMA_CHECK(given == 0) << layer << ": give either " << field << " or " << pair_fields << ", not both";
    CREMA_CHECK(axes == 2) << layer << ": " << pair_fields << " apply to 2-d input only, but the input has " << axes
                           << " spatial axes; use the repeated " << field;
    return {static_cast<int>(h), static_cast<int>(w)};
  }
  if (given == 0) {
    CREMA_CHECK(fallback >= 0) << layer << ": " << field << " must be given (or " << pair_fields << ")";
    return std::vector<int>(axes, fallback);
  }
  CREMA_CHECK(given == 1 || given == axes) << layer << ": " << field << " must have one value, or one per "
                                           << "spatial axis (" << axes << "), but has " << given;
  std::vector<int> result;
  for (int i = 0; i < axes; ++i) result.push_back(static_cast<int>(values.Get(given == 1 ? 0 : i)));
  return result;
}

}  // namespace

void ConvolutionLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ConvolutionParameter& param = param_.convolution_param();
  const std::string me = describe();
  const Blob& input = *bottom[0];
  channel_axis_ = CanonicalAxis(input, param.axis(), "convolution_param.axis");
  num_spatial_axes_ = input.num_axes() - channel_axis_ - 1;
  CREMA_CHECK(num_spatial_axes_ >= 1) << me << ": needs at least one spatial axis after the channel axis "
                                      << channel_axis_ << ", but the input has shape " << input.shape_string();
  const int axes = num_spatial_axes_;

  CREMA_CHECK(param.has_kernel_h() == param.has_kernel_w())
      << me << ": give both kernel_h and kernel_w (or kernel_size)";
  CREMA_CHECK(param.has_stride_h() == param.has_stride_w()) << me << ": give both stride_h and stride_w (or stride)";
  kernel_ = SpatialSetting(me, "kernel_size", param.kernel_size(), "kernel_h/kernel_w", param.has_kernel_h(),
                           param.kernel_h(), param.kernel_w(), axes, -1);
  stride_ = SpatialSetting(me, "stride", param.stride(), "stride_h/stride_w", param.has_stride_h(), param.stride_h(),
                           param.stride_w(), axes, 1);
  pad_ = SpatialSetting(me, "pad", param.pad(), "pad_h/pad_w", param.has_pad_h() || param.has_pad_w(), param.pad_h(),
                        param.pad_w(), axes, 0);
  dilation_ = SpatialSetting(me, "dilation", param.dilation(), "", false, 0, 0, axes, 1);
  is_1x1_ = true;
  for (int i = 0; i < axes; ++i) {
    CREMA_CHECK(kernel_[i] > 0) << me << ": kernel_size must be positive, but is 0 along spatial axis " << i;
    CREMA_CHECK(stride_[i] > 0) << me << ": stride must be positive, but is 0 along spatial axis " << i;
    CREMA_CHECK(dilation_[i] > 0) << me << ": dilation must be positive, but is 0 along spatial axis " << i;
    is_1x1_ = is_1x1_ && kernel_[i] == 1 && stride_[i] == 1 && pad_[i] == 0;
  }
  use_2d_ = axes == 2 && !param.force_nd_im2col();

  num_output_ = static_cast<int>(param.num_output());
  CREMA_CHECK(num_output_ > 0) << me << ": num_output must be given and positive";
  group_ = static_cast<int>(param.group());
  channels_ = input.shape(channel_axis_);
  CREMA_CHECK(group_ > 0) << me << ": group must be positive";
  CREMA_CHECK(channels_ % group_ == 0) << me << ": group " << group_ << " must divide the input channels " << channels_
                                       << " (input shape " << input.shape_string() << ")";
  CREMA_CHECK(num_output_ % group_ == 0) << me << ": group " << group_ << " must divide num_output " << num_output_;
  bias_term_ = param.bias_term();

  std::vector<int> weight_shape = {num_output_, channels_ / group_};
  weight_shape.insert(weight_shape.end(), kernel_.begin(), kernel_.end());
  std::vector<std::vector<int>> shapes = {weight_shape};
  if (bias_term_) shapes.push_back({num_output_});
  if (!blobs_.empty()) {
    AdoptStoredParameters(shapes, {"weights", "bias"});
    return;
  }
  blobs_.push_back(std::make_shared<Blob>(weight_shape));
  Fill(param.weight_filler(), blobs_[0].get(), random());
  if (bias_term_) {
    blobs_.push_back(std::make_shared<Blob>(shapes[1]));
    Fill(param.bias_filler(), blobs_[1].get(), random());
  }
}

void ConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
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
  image_size_ = input.count(channel_axis_);
  std::vector<int> top_shape(input.shape().begin(), input.shape().begin() + channel_axis_);
  top_shape.push_back(num_output_);
  image_shape_ = {channels_};
  column_shape_ = {channels_};
  output_spatial_size_ = 1;
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int in = input.shape(channel_axis_ + 1 + i);
    const int extent = dilation_[i] * (kernel_[i] - 1) + 1;
    CREMA_CHECK(in + 2 * pad_[i] >= extent)
        << me << ": kernel_size " << kernel_[i] << " with dilation " << dilation_[i] << " spans " << extent
        << " positions, more than the padded input along spatial axis " << i << " (" << in << " + 2 * pad " << pad_[i]
        << "); input shape " << input.shape_string() << ", so the output would be empty";
    const int out = (in + 2 * pad_[i] - extent) / stride_[i] + 1;
    top_shape.push_back(out);
    image_shape_.push_back(in);
    column_shape_.push_back(out);
    column_shape_[0] *= kernel_[i];
    output_spatial_size_ *= out;
  }
  for (Blob* output : top) output->Reshape(top_shape);
  kernel_dim_ = column_shape_[0] / group_;
  RequestWorkspace(is_1x1_ ? 0 : static_cast<size_t>(column_shape_[0]) * output_spatial_size_);
}

void ConvolutionLayer::Unroll(const float* image, float* columns) const {
  if (use_2d_) {
    im2col_cpu(image, channels_, image_shape_[1], image_shape_[2], kernel_[0], kernel_[1], pad_[0], pad_[1], stride_[0],
               stride_[1], dilation_[0], dilation_[1], columns);
  } else {
    im2col_nd_cpu(image, num_spatial_axes_, image_shape_.data(), column_shape_.data(), kernel_.data(), pad_.data(),
                  stride_.data(), dilation_.data(), columns);
  }
}

void ConvolutionLayer::Fold(const float* columns, float* image) const {
  if (use_2d_) {
    col2im_cpu(columns, channels_, image_shape_[1], image_shape_[2], kernel_[0], kernel_[1], pad_[0], pad_[1],
               stride_[0], stride_[1], dilation_[0], dilation_[1], image);
  } else {
    col2im_nd_cpu(columns, num_spatial_axes_, image_shape_.data(), column_shape_.data(), kernel_.data(), pad_.data(),
                  stride_.data(), dilation_.data(), image);
  }
}

// Images run one after another: the matrix products use the BLAS's own threads, and an OpenMP loop over the
// batch around them would fight those threads for the cores (with the pthread OpenBLAS, measured several
// times slower on a 2-core machine).
void ConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weights = blobs_[0]->cpu_data();
  const int group_outputs = num_output_ / group_;
  const int top_image_size = num_output_ * output_spatial_size_;
  for (size_t b = 0; b < bottom.size(); ++b) {
    const float* input = bottom[b]->cpu_data();
    float* output = top[b]->mutable_cpu_data();
    for (int n = 0; n < num_; ++n) {
      const float* columns = input + n * image_size_;
      if (!is_1x1_) {
        float* unrolled = workspace();
        Unroll(columns, unrolled);
        columns = unrolled;
      }
      float* out = output + n * top_image_size;
      for (int g = 0; g < group_; ++g) {
        cpu_gemm(Transpose::kNo, Transpose::kNo, group_outputs, output_spatial_size_, kernel_dim_, 1.f,
                 weights + g * group_outputs * kernel_dim_, columns + g * kernel_dim_ * output_spatial_size_, 0.f,
                 out + g * group_outputs * output_spatial_size_);
      }
      if (bias_term_) {
        cpu_gemm(Transpose::kNo, Transpose::kNo, num_output_, output_spatial_size_, 1, 1.f, blobs_[1]->cpu_data(),
                 context().ones(output_spatial_size_), 1.f, out);
      }
    }
  }
}

void ConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  const float* weights = blobs_[0]->cpu_data();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  const int group_outputs = num_output_ / group_;
  const int top_image_size = num_output_ * output_spatial_size_;
  // Parameter gradients accumulate (over images, bottoms and calls): the net zeroes them before a backward.
  for (size_t b = 0; b < top.size(); ++b) {
    const float* input = bottom[b]->cpu_data();
    for (int n = 0; n < num_; ++n) {
      const float* top_diff = top[b]->cpu_diff() + n * top_image_size;
      if (bias_grad) {
        cpu_gemv(Transpose::kNo, num_output_, output_spatial_size_, 1.f, top_diff, context().ones(output_spatial_size_),
                 1.f, blobs_[1]->mutable_cpu_diff());
      }
      if (weight_grad) {
        const float* columns = input + n * image_size_;
        if (!is_1x1_) {
          float* unrolled = workspace();
          Unroll(columns, unrolled);
          columns = unrolled;
        }
        float* weight_diff = blobs_[0]->mutable_cpu_diff();
        for (int g = 0; g < group_; ++g) {
          cpu_gemm(Transpose::kNo, Transpose::kYes, group_outputs, kernel_dim_, output_spatial_size_, 1.f,
                   top_diff + g * group_outputs * output_spatial_size_,
                   columns + g * kernel_dim_ * output_spatial_size_, 1.f,
                   weight_diff + g * group_outputs * kernel_dim_);
        }
      }
      if (propagate_down[b]) {
        float* input_diff = bottom[b]->mutable_cpu_diff() + n * image_size_;
        // For 1x1 kernels the column gradient is the image gradient itself.
        float* column_diff = is_1x1_ ? input_diff : workspace();
        for (int g = 0; g < group_; ++g) {
          cpu_gemm(Transpose::kYes, Transpose::kNo, kernel_dim_, output_spatial_size_, group_outputs, 1.f,
                   weights + g * group_outputs * kernel_dim_, top_diff + g * group_outputs * output_spatial_size_, 0.f,
                   column_diff + g * kernel_dim_ * output_spatial_size_);
        }
        if (!is_1x1_) Fold(column_diff, input_diff);
      }
    }
  }
}

}  // namespace crema
