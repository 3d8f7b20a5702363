// BatchNorm on cuDNN (see cudnn_batch_norm.hpp).
#include "layers/normalization/cudnn_batch_norm.hpp"

#ifdef CREMA_USE_CUDNN

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "core/blob_elements.hpp"
#include "core/math_functions.hpp"

namespace crema {

std::string CudnnBatchNormLayer::Refusal(const EngineQuery& query) {
  const BatchNormParameter& param = query.param.batch_norm_param();
  std::ostringstream why;
  if (param.eps() >= 0.f && static_cast<double>(param.eps()) < cudnn::kBatchNormMinEpsilon) {
    why << "cuDNN's batch normalisation needs eps >= " << cudnn::kBatchNormMinEpsilon << " (eps " << param.eps() << ")";
    return why.str();
  }
  const bool global = param.has_use_global_stats() ? param.use_global_stats() : query.param.phase() == TEST;
  if (global || query.bottom_shapes.empty() || query.bottom_shapes[0].empty()) return "";
  const std::vector<int>& shape = query.bottom_shapes[0];
  const long long channels = shape.size() == 1 ? 1 : shape[1];
  long long count = 1;
  for (int dim : shape) count *= dim;
  if (channels > 0 && count / channels == 1) {
    why << "with batch statistics over one value per channel (input " << ShapeString(shape)
        << "), cuDNN's unbiased variance divides by zero";
    return why.str();
  }
  return "";
}

void CudnnBatchNormLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SetUpStatistics(bottom);
  // Every forward writes all three (the kept values in place with batch statistics; none otherwise).
  mean_ = AddInternalBlob("mean", InternalLifetime::kUntilBackward);
  inv_std_ = AddInternalBlob("inv_std", InternalLifetime::kUntilBackward);
  kept_ = AddInternalBlob("normalized", InternalLifetime::kUntilBackward);
}

void CudnnBatchNormLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReadShape(bottom, top);
  const Blob& input = *bottom[0];
  // The refusal saw the first shape; a later one may hold one value per channel.
  CREMA_CHECK(use_global_stats_ || num_ * spatial_ != 1)
      << describe() << ": the cudnn engine cannot normalise the input " << input.shape_string()
      << " with batch statistics: one value per channel, where cuDNN's unbiased variance divides by zero; run it "
      << "with the native engine (--engine=BatchNorm:native)";
  in_place_ = top[0] == bottom[0];
  mean_->Reshape({channels_});
  inv_std_->Reshape({channels_});
  const bool keeps = (in_place_ && !use_global_stats_) || absorbs_affine();
  kept_->Reshape({keeps ? input.count() : 0});
  if (input.count() > 0) {
    x_desc_.SetPacked({num_, channels_, spatial_, 1});
    cudnn::DescribeBatchNormChannels(x_desc_, &channels_desc_);
  }
  // cuDNN's calls' parts (below), and with a fused Scale the native engine's backward.
  size_t floats = 0;
  if (!use_global_stats_) floats = 3 * Aligned(channels_) + (in_place_ && !absorbs_affine() ? input.count() : 0);
  if (absorbs_affine()) floats = std::max(floats, GpuWorkspaceFloats(input));
  if (floats > 0) RequestWorkspace(floats);
}

void CudnnBatchNormLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Device d = device();
  const int count = bottom[0]->count();
  float* mean = mean_->mutable_data_on(d);
  float* inv_std = inv_std_->mutable_data_on(d);
  // With the stored statistics, and where a fused Scale computing in half precision reads its input in 16 bits (which
  // cuDNN's call here takes in floats only), the native engine's rules; x_hat kept where backward reads it (with a
  // fused Scale), else written to the top's floats.
  if (use_global_stats_ || ReadsHalfInGpuCode()) {
    const bool keeps = absorbs_affine() || IsHalfType(top[0]->data_type());
    NormalizeGpu(*bottom[0], top[0], mean, keeps ? kept_->mutable_data_on(d) : top[0]->mutable_data_on(d));
    return;
  }
  // cuDNN adds factor * statistic to its running tensors after scaling them by 1 - factor: with factor 1 and
  // zeros to start from (never garbage: 0 * NaN would stay NaN), they receive the batch's statistics.
  const size_t channels = Aligned(channels_);
  float* zeros = workspace();
  float* batch_mean = zeros + channels;
  float* batch_variance = zeros + 2 * channels;
  set(context(), static_cast<int>(3 * channels), 0.f, zeros);
  if (count > 0) {
    // In place (or with a fused Scale), y goes to the kept normalized values first, then to the top (which may be the
    // input), through the Scale and ReLU where there are some.
    const bool keeps = in_place_ || absorbs_affine();
    float* y = keeps ? kept_->mutable_data_on(d) : top[0]->mutable_data_on(d);
    cudnn::BatchNormForwardTraining(context(), x_desc_, bottom[0]->data_on(d), y, channels_desc_,
                                    context().ones(channels_), zeros, 1.0, batch_mean, batch_variance, eps_, mean,
                                    inv_std);
    if (absorbs_affine()) {
      const BatchNormAffine affine = GpuAffine();
      WithMutableValuesOn(top[0], d, [&](auto* out, bool bfloat16) {  // 16 bits where planned (WritesQuantized)
        using T = std::remove_pointer_t<decltype(out)>;
        for_each_element(context(), count, BatchNormAffineRuleOf<T>{y, out, channels_, spatial_, affine, bfloat16});
      });
    } else if (in_place_) {
      copy(context(), count, y, top[0]->mutable_data_on(d));
    }
  }
  // An empty batch adds zeros, as in the native engine.
  for_each_element(
      context(), channels_,
      BatchNormUpdateRule{batch_mean, batch_variance, params_[0]->mutable_data_on(d), params_[1]->mutable_data_on(d),
                          params_[2]->mutable_data_on(d), nullptr, fraction_, 1.f, eps_});
}

void CudnnBatchNormLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                       const std::vector<Blob*>& bottom) {
  // The blobs get no gradient: they are statistics, not parameters (a fused Scale's do).
  if (absorbs_affine()) {
    AffineBackwardGpu(*top[0], propagate_down[0], *kept_, bottom[0]);
    return;
  }
  const int count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const Device d = device();
  if (use_global_stats_) {
    for_each_element(context(), count,
                     BatchNormBackwardRule{top[0]->diff_on(d), nullptr, inv_std_->data_on(d), nullptr, nullptr,
                                           bottom[0]->mutable_diff_on(d), channels_, spatial_});
    return;
  }
  const size_t channels = Aligned(channels_);
  float* scale_diff = workspace();
  float* bias_diff = scale_diff + channels;
  const float* dy = top[0]->diff_on(d);
  if (in_place_) {
    // x_hat = (x - mean) * inv_std is what the kept values are: given as the input with mean 0 and inverse deviation
    // 1, and with inv_std as cuDNN's scale, cuDNN's gradient inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat)) is
    // the same.
    float* zeros = scale_diff + 2 * channels;
    float* kept_dy = scale_diff + 3 * channels;
    set(context(), channels_, 0.f, zeros);
    copy(context(), count, dy, kept_dy);
    cudnn::BatchNormBackward(context(), x_desc_, kept_->data_on(d), kept_dy, bottom[0]->mutable_diff_on(d),
                             channels_desc_, inv_std_->data_on(d), scale_diff, bias_diff, eps_, zeros,
                             context().ones(channels_));
    return;
  }
  const float* x = bottom[0]->data_on(d);
  cudnn::BatchNormBackward(context(), x_desc_, x, dy, bottom[0]->mutable_diff_on(d), channels_desc_,
                           context().ones(channels_), scale_diff, bias_diff, eps_, mean_->data_on(d),
                           inv_std_->data_on(d));
}

}  // namespace crema

#endif  // CREMA_USE_CUDNN
