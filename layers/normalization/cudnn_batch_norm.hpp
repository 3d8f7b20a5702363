// BatchNorm, engine `cudnn` (GPU only, in builds with cuDNN): cuDNN's spatial batch normalisation (core/cudnn.hpp) with
// Caffe's statistics. Parameters, checks and blobs as the native BatchNorm (layers/normalization/batch_norm.hpp), whose
// class it extends; the blobs are updated by the native engine's formula (to float rounding: cuDNN sums in an order of
// its own), so a snapshot does not depend on the engine.
//
// The bottom (N, C, ...) is seen as the 4-d (N, C, rest, 1) (a 1-axis bottom as (N, 1, 1, 1)); cuDNN's scale and
// bias are the context's ones and zeros in the workspace (Caffe's BatchNorm has neither; Scale follows it).
//   - With batch statistics: cuDNN's training forward gives y and keeps its mean and inverse deviation (the
//     internal blobs `<layer>.mean`, `<layer>.inv_std`) for its backward. Its own running averages are not Caffe's
//     sums; asked with factor 1 into zeroed scratch, they are the batch's mean and unbiased variance, which the
//     native engine's rule (BatchNormUpdateRule, correction 1) adds to the blobs: sum = sum * fraction + statistic,
//     factor = factor * fraction + 1.
//   - With the stored statistics (use_global_stats; the TEST phase's default): a rule turns the sums into the mean
//     and 1 / sqrt(var + eps), another normalises, and backward is the per-channel scale dy / sqrt(var + eps): the
//     native engine's rules (BatchNormStoredRule, BatchNormNormalizeRuleOf, BatchNormBackwardRule). cuDNN's backward
//     assumes batch statistics, and its inference forward is not documented to run in place, as BatchNorm usually
//     does; these rules are the same one pass over the values.
// In place with batch statistics, cuDNN's training forward writes y to the internal blob `<layer>.normalized`, which
// is copied to the top and kept for backward (the top may be overwritten by then: a Scale in place reads the kept
// values too, Layer::KeptTop). Backward hands cuDNN those normalized values as its input, with a saved mean of 0, a
// saved inverse deviation of 1 and 1 / sqrt(var + eps) as the scale, which is the same gradient; it copies dy to
// the workspace. Out of place the input is read where it is. (Not yet run on a GPU.)
//
// With the Scale and ReLU after it fused for training (AbsorbAffine), cuDNN normalises into the kept values (its own
// scale and bias stay ones and zeros), the native engine's rules run the Scale and ReLU from them into the top, and
// backward is the native engine's rules (BatchNormLayer::AffineBackwardGpu): the Scale's gradients are sums of the same
// terms as the input's means. With the stored statistics the kept values are the normalization's. So fused where the
// layers compute in float16 or bf16, it reads its input in that type (BatchNormLayer::ReadsQuantized), which cuDNN's
// call here takes in floats only: the native engine's forward runs then (BatchNormLayer::NormalizeGpu).
//
// Takes (Refusal) every BatchNorm but one with batch statistics over one value per channel (N * rest = 1): cuDNN's
// unbiased variance divides by zero there, where the native engine adds 0. (An eps below cuDNN's minimum would be
// refused too; cuDNN 9's minimum is 0, which the layer's own check already asks.)
#pragma once

#ifdef CREMA_USE_CUDNN

#include <string>
#include <vector>

#include "core/cudnn.hpp"
#include "layers/layer_registry.hpp"
#include "layers/normalization/batch_norm.hpp"

namespace crema {

class CudnnBatchNormLayer : public GpuOnly<BatchNormLayer> {
 public:
  using GpuOnly<BatchNormLayer>::GpuOnly;
  // cuDNN's backward takes the input; with a fused Scale the rules read the normalized values kept.
  bool BackwardReadsBottom(int) const override { return !absorbs_affine(); }
  // In place it reads the normalized values it kept (batch statistics, or a fused Scale) or no input at all (stored
  // statistics).
  bool BackwardReadsInPlace(int index) const override {
    return !in_place_ && !absorbs_affine() && GpuOnly<BatchNormLayer>::BackwardReadsInPlace(index);
  }
  // In place with batch statistics it keeps its normalized values, which are the top's unless it runs a fused Scale.
  const Blob* KeptTop(int) const override {
    return in_place_ && !use_global_stats_ && !absorbs_affine() ? kept_ : nullptr;
  }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The workspace's parts, each starting on a 256-byte boundary: training forward's zeros (cuDNN's bias) and
  // cuDNN's running mean and variance; backward's scale and bias gradients (dropped), zeros (in place: the saved
  // mean) and, in place, a copy of dy.
  static size_t Aligned(size_t floats) { return (floats + 63) / 64 * 64; }

  bool in_place_ = false;
  cudnn::TensorDescriptor x_desc_;         // (N, C, rest, 1)
  cudnn::TensorDescriptor channels_desc_;  // (1, C, 1, 1)
  Blob* mean_ = nullptr;                   // the mean each forward normalised with
  Blob* kept_ = nullptr;  // in place with batch statistics, or with a fused Scale: the normalized values, for backward
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
