#include "layers/normalization/batch_norm.hpp"

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/blob_elements.hpp"
#include "core/elementwise.hpp"
#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "layers/normalization/batch_norm_affine.hpp"

namespace crema {

void BatchNormLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SetUpStatistics(bottom);
  normalized_ = AddInternalBlob("normalized", InternalLifetime::kUntilBackward);
  inv_std_ = AddInternalBlob("inv_std", InternalLifetime::kUntilBackward);
}

void BatchNormLayer::SetUpStatistics(const std::vector<Blob*>& bottom) {
  const BatchNormParameter& param = param_.batch_norm_param();
  const std::string me = describe();
  use_global_stats_ = param.has_use_global_stats() ? param.use_global_stats() : phase() == TEST;
  fraction_ = param.moving_average_fraction();
  eps_ = param.eps();
  CREMA_CHECK(fraction_ >= 0.f && fraction_ <= 1.f)
      << me << ": batch_norm_param.moving_average_fraction " << fraction_ << " must lie in [0, 1]";
  CREMA_CHECK(eps_ >= 0.f) << me << ": batch_norm_param.eps " << eps_ << " must not be negative";
  CREMA_CHECK(bottom[0]->num_axes() >= 1)
      << me << ": the input of shape " << bottom[0]->shape_string() << " has no channel axis";
  const int channels = Channels(*bottom[0]);
  const std::vector<std::vector<int>> shapes = {{channels}, {channels}, {1}};
  if (!params_.empty()) {
    CREMA_CHECK(params_.size() == 3) << me << ": the stored parameters hold " << params_.size()
                                    << " blob(s), but BatchNorm keeps 3 (mean sum, variance sum, scale factor)";
    AdoptStoredParameters(shapes, {"running mean sum", "running variance sum", "scale factor"});
  } else {
    for (const auto& shape : shapes) {
      params_.push_back(std::make_shared<Blob>(shape));
      params_.back()->set_data(0.f);
    }
  }
  // The statistics are not learned: ParamSpecs with lr_mult 0 keep every solver away from them.
  for (int i = 0; i < 3; ++i) {
    if (i < param_.param_size()) {
      CREMA_CHECK(param_.param(i).lr_mult() == 0.f)
          << me << ": param " << i << " sets lr_mult " << param_.param(i).lr_mult()
          << ", but BatchNorm's blobs are running statistics, not learned parameters; give lr_mult 0 or no param";
    } else {
      ParamSpec* spec = param_.add_param();
      spec->set_lr_mult(0.f);
      spec->set_decay_mult(0.f);
    }
    set_param_propagate_down(i, false);
  }
}

void BatchNormLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadShape(bottom, top);
  normalized_->ReshapeLike(*bottom[0]);
  inv_std_->Reshape({channels_});
  if (RunsGpuCode()) RequestWorkspace(GpuWorkspaceFloats(*bottom[0]));
}

size_t BatchNormLayer::GpuWorkspaceFloats(const Blob&) const {
  // Two values per channel (the mean and variance, or backward's sums of dz and dz * x_hat), then, with batch
  // statistics or a fused Scale (whose gradients are sums too), the GPU's partial sums of two terms a channel. The
  // CPU's loops need none.
  const bool sums = !use_global_stats_ || absorbs_affine();
  return 2 * static_cast<size_t>(channels_) + (sums ? SumPerChannelScratch(num_, channels_, spatial_, 2) : 0);
}

void BatchNormLayer::ReadShape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& input = *bottom[0];
  CREMA_CHECK(input.num_axes() >= 1) << describe() << ": the input of shape " << input.shape_string()
                                     << " has no channel axis";
  channels_ = Channels(input);
  CREMA_CHECK(channels_ == params_[0]->count())
      << describe() << ": the input of shape " << input.shape_string() << " has " << channels_
      << " channel(s) (axis 1), but the statistics (shape " << params_[0]->shape_string() << ") have "
      << params_[0]->count();
  num_ = input.shape(0);
  spatial_ = channels_ == 0 || num_ == 0 ? 0 : input.count() / (num_ * channels_);
  if (top[0] != bottom[0]) top[0]->ReshapeLike(input);
}

bool BatchNormLayer::ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const {
  if (!use_global_stats_ || channels != channels_) return false;
  std::vector<float> mean(channels), variance(channels);
  StoredStatistics(mean.data(), variance.data());
  scale->resize(channels);
  shift->resize(channels);
  InverseDeviations(variance.data(), scale->data());
  for (int c = 0; c < channels; ++c) (*shift)[c] = -mean[c] * (*scale)[c];
  return true;
}

void BatchNormLayer::AbsorbAffine(std::shared_ptr<Blob> scale, std::shared_ptr<Blob> bias, bool learn_scale,
                                  bool learn_bias, bool relu) {
  CREMA_CHECK(scale != nullptr && scale->count() == channels_ && (bias == nullptr || bias->count() == channels_))
      << describe() << ": a fused Scale needs a scale (and bias) per channel, " << channels_ << " of them";
  CREMA_CHECK(!RunsGpuCode() || AbsorbsAffineInGpuCode())
      << describe() << ": this engine's GPU code runs no fused Scale and ReLU";
  affine_scale_ = std::move(scale);
  affine_bias_ = std::move(bias);
  learn_scale_ = learn_scale;
  learn_bias_ = learn_bias && affine_bias_ != nullptr;
  affine_relu_ = relu;
}

void BatchNormLayer::AffineForward(Blob* top) const {
  const ChannelGrid grid{num_, channels_, spatial_, ChannelBlock(top->layout(), channels_)};
  const float* bias = affine_bias_ != nullptr ? affine_bias_->cpu_data() : nullptr;
  WithMutableData(top, [&](auto* y) {
    AffineForwardLoops(grid, normalized_->cpu_data(), affine_scale_->cpu_data(), bias, affine_relu_, y);
  });
}

void BatchNormLayer::Bfloat16Forward(const Blob& bottom, const float* mean, const float* inv_std, Blob* top) const {
  const ChannelGrid grid{num_, channels_, spatial_, ChannelBlock(top->layout(), channels_)};
  const float* bias = affine_bias_ != nullptr ? affine_bias_->cpu_data() : nullptr;
  auto* xhat = static_cast<uint16_t*>(normalized_->mutable_cpu_bytes());
  WithData(bottom, [&](const auto* x) {
    WithMutableData(top, [&](auto* y) {
      Bfloat16NormalizeLoops(grid, x, mean, inv_std, affine_scale_->cpu_data(), bias, affine_relu_, xhat, y);
    });
  });
}

void BatchNormLayer::BackwardLoops(const Blob& top, bool propagate_down, Blob* bottom) const {
  const ChannelGrid grid{num_, channels_, spatial_, ChannelBlock(top.layout(), channels_)};
  const bool fused = absorbs_affine();
  const float* gamma = fused ? affine_scale_->cpu_data() : nullptr;
  const float* beta = fused && affine_bias_ != nullptr ? affine_bias_->cpu_data() : nullptr;
  float* gamma_diff = learn_scale_ ? affine_scale_->mutable_cpu_diff() : nullptr;
  float* beta_diff = learn_bias_ ? affine_bias_->mutable_cpu_diff() : nullptr;
  const float* inv_std = inv_std_->cpu_data();
  const bool batch = !use_global_stats_;
  if (normalized_->data_type() == ElementType::kBfloat16) {  // the bf16 rule: dy read rounded to bf16
    const auto* xhat = static_cast<const uint16_t*>(normalized_->cpu_bytes());
    return WithDiff(top, [&](const auto* dy) {
      WithMutableDiff(
          bottom,
          [&](auto* dx) {
            AffineBackwardLoops(grid, dy, xhat, inv_std, gamma, beta, affine_relu_, batch, dx, gamma_diff, beta_diff);
          },
          propagate_down);
    });
  }
  // In floats, dx may be dy (in place).
  const float* xhat = normalized_->cpu_data();
  WithMutableDiff(
      bottom,
      [&](auto* dx) {
        AffineBackwardLoops(grid, top.cpu_diff(), xhat, inv_std, gamma, beta, affine_relu_, batch, dx, gamma_diff,
                            beta_diff);
      },
      propagate_down);
}

void BatchNormLayer::StoredStatistics(float* mean, float* variance) const {
  const float stored = params_[2]->cpu_data()[0];
  const float factor = stored == 0.f ? 0.f : 1.f / stored;
  for (int c = 0; c < channels_; ++c) {
    mean[c] = params_[0]->cpu_data()[c] * factor;
    variance[c] = params_[1]->cpu_data()[c] * factor;
  }
}

void BatchNormLayer::UpdateStatistics(const float* mean, const float* variance) {
  // Running sums: the variance with the unbiased correction.
  const int m = num_ * spatial_;
  const float correction = m > 1 ? static_cast<float>(m) / (m - 1) : 1.f;
  float* mean_sum = params_[0]->mutable_cpu_data();
  float* variance_sum = params_[1]->mutable_cpu_data();
  for (int c = 0; c < channels_; ++c) {
    mean_sum[c] = mean_sum[c] * fraction_ + mean[c];
    variance_sum[c] = variance_sum[c] * fraction_ + correction * variance[c];
  }
  float* factor = params_[2]->mutable_cpu_data();
  factor[0] = factor[0] * fraction_ + 1.f;
}

void BatchNormLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  float* xhat = normalized_->mutable_cpu_data();
  float* inv_std = inv_std_->mutable_cpu_data();
  const int m = num_ * spatial_;
  std::vector<float> mean(channels_), variance(channels_);
  if (use_global_stats_) {
    StoredStatistics(mean.data(), variance.data());
  } else {
    // Channels are independent: each thread takes whole channels, so every sum runs in the one-thread order.
#pragma omp parallel for if (bottom[0]->count() >= ParallelElementThreshold()) schedule(static)
    for (int c = 0; c < channels_; ++c) {
      double sum = 0, sumsq = 0;
      for (int n = 0; n < num_; ++n) {
        const float* p = x + (n * channels_ + c) * spatial_;
        for (int i = 0; i < spatial_; ++i) sum += p[i];
      }
      const double mu = m > 0 ? sum / m : 0.0;
      for (int n = 0; n < num_; ++n) {
        const float* p = x + (n * channels_ + c) * spatial_;
        for (int i = 0; i < spatial_; ++i) sumsq += (p[i] - mu) * (p[i] - mu);
      }
      mean[c] = static_cast<float>(mu);
      variance[c] = static_cast<float>(m > 0 ? sumsq / m : 0.0);
    }
    UpdateStatistics(mean.data(), variance.data());
  }
  InverseDeviations(variance.data(), inv_std);
  float* y = top[0]->mutable_cpu_data();  // may be x (in place): each element is read before it is written
#pragma omp parallel for collapse(2) if (bottom[0]->count() >= ParallelElementThreshold()) schedule(static)
  for (int n = 0; n < num_; ++n)
    for (int c = 0; c < channels_; ++c) {
      const int offset = (n * channels_ + c) * spatial_;
      for (int i = 0; i < spatial_; ++i) {
        xhat[offset + i] = (x[offset + i] - mean[c]) * inv_std[c];
        y[offset + i] = xhat[offset + i];
      }
    }
  if (absorbs_affine()) AffineForward(top[0]);
}

void BatchNormLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  // The blobs get no gradient: they are statistics, not parameters (a fused Scale's do). dx may be dy (in place).
  if (propagate_down[0] || absorbs_affine()) BackwardLoops(*top[0], propagate_down[0], bottom[0]);
}

BatchNormAffine BatchNormLayer::GpuAffine() const {
  if (!absorbs_affine()) return {};
  const Device d = device();
  return {affine_scale_->data_on(d), affine_bias_ != nullptr ? affine_bias_->data_on(d) : nullptr, affine_relu_};
}

void BatchNormLayer::AffineBackwardGpu(const Blob& top, bool propagate_down, const Blob& normalized, Blob* bottom) {
  const Device d = device();
  const int count = bottom->count();
  const BatchNormAffine affine = GpuAffine();
  const float* dy = top.diff_on(d);
  const float* xhat = normalized.data_on(d);
  // Per channel, the sums of dz (the gradient reaching z) and of dz * x_hat, in one pass: the bias's and the scale's
  // gradients, and with batch statistics (times 1 / m) the means the input's gradient subtracts.
  float* sum_dz = workspace();
  float* sum_dz_xhat = sum_dz + channels_;
  const bool batch = !use_global_stats_;
  if (batch || learn_bias_ || learn_scale_) {
    sum_per_channel(context(), num_, channels_, spatial_, BatchNormGradientTerms{dy, xhat, affine}, 1.f, sum_dz,
                    sum_dz + 2 * channels_);
    if (learn_bias_) axpy(context(), channels_, 1.f, sum_dz, affine_bias_->mutable_diff_on(d));
    if (learn_scale_) axpy(context(), channels_, 1.f, sum_dz_xhat, affine_scale_->mutable_diff_on(d));
  }
  if (!propagate_down) return;
  if (batch) {
    const int m = num_ * spatial_;
    scale(context(), 2 * channels_, m > 0 ? 1.f / m : 0.f, sum_dz);  // both sums become means
  }
  for_each_element(
      context(), count,
      BatchNormBackwardRule{dy, xhat, inv_std_->data_on(d), batch ? sum_dz : nullptr, batch ? sum_dz_xhat : nullptr,
                            bottom->mutable_diff_on(d), channels_, spatial_, affine});
}

void BatchNormLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CREMA_CHECK(bottom[0]->layout() == Layout::kPlain) << describe() << ": the GPU code takes the plain layout only";
  NormalizeGpu(*bottom[0], top[0], workspace(), normalized_->mutable_data_on(device()));
}

void BatchNormLayer::NormalizeGpu(const Blob& bottom, Blob* top, float* mean, float* xhat) {
  const Device d = device();
  const int count = bottom.count();
  float* inv_std = inv_std_->mutable_data_on(d);
  const BatchNormAffine affine = GpuAffine();
  // The input as it lies, in floats or 16 bits; floats rounded to 16 bits where the layer reads them so.
  const bool rounds = ReadsHalfInGpuCode();
  const bool bfloat16 = rounds && GpuCodePrecision() == Precision::kBfloat16;
  auto normalize = [&](auto input) {
    if (use_global_stats_) {
      for_each_element(context(), channels_,
                       BatchNormStoredRule{params_[0]->data_on(d), params_[1]->data_on(d), params_[2]->data_on(d), mean,
                                           inv_std, eps_});
    } else {
      // Two passes over the input: the mean, then the squared deviations from it (steadier than one pass's sums of
      // squares, which lose the variance to cancellation where the mean is large).
      float* variance = workspace() + (mean == workspace() ? channels_ : 0);
      float* scratch = workspace() + 2 * channels_;
      const int m = num_ * spatial_;
      const float per_value = m > 0 ? 1.f / m : 0.f;
      using In = std::remove_const_t<std::remove_pointer_t<decltype(input.x)>>;
      sum_per_channel(context(), num_, channels_, spatial_, BatchNormValueTermsOf<In>{input}, per_value, mean, scratch);
      sum_per_channel(context(), num_, channels_, spatial_, BatchNormSquaredDeviationTermsOf<In>{input, mean},
                      per_value, variance, scratch);
      for_each_element(context(), channels_,
                       BatchNormUpdateRule{mean, variance, params_[0]->mutable_data_on(d),
                                           params_[1]->mutable_data_on(d), params_[2]->mutable_data_on(d), inv_std,
                                           fraction_, m > 1 ? static_cast<float>(m) / (m - 1) : 1.f, eps_});
    }
    WithMutableValuesOn(top, d, [&](auto* y, bool top_bfloat16) {  // 16 bits where planned (WritesQuantized)
      using In = std::remove_const_t<std::remove_pointer_t<decltype(input.x)>>;
      using Out = std::remove_pointer_t<decltype(y)>;
      for_each_element(
          context(), count,
          BatchNormNormalizeRuleOf<In, Out>{input, mean, inv_std, xhat, y, channels_, spatial_, affine, top_bfloat16});
    });
  };
  if (BottomIsHalf(bottom, 0, rounds)) {
    normalize(BatchNormInputOf<uint16_t>{static_cast<const uint16_t*>(bottom.bytes_on(d)), bfloat16, false});
  } else {
    normalize(BatchNormInputOf<float>{bottom.data_on(d), bfloat16, rounds});
  }
}

void BatchNormLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  // The blobs get no gradient: they are statistics, not parameters (a fused Scale's do). Without a fused Scale, the
  // same rules with none (dz = dy).
  if (absorbs_affine() || (propagate_down[0] && !use_global_stats_)) {
    AffineBackwardGpu(*top[0], propagate_down[0], *normalized_, bottom[0]);
    return;
  }
  if (!propagate_down[0]) return;
  const Device d = device();
  for_each_element(context(), bottom[0]->count(),
                   BatchNormBackwardRule{top[0]->diff_on(d), nullptr, inv_std_->data_on(d), nullptr, nullptr,
                                         bottom[0]->mutable_diff_on(d), channels_, spatial_});
}

}  // namespace crema
