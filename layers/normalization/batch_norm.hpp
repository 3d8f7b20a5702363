// BatchNorm: normalises each channel (axis 1) of the bottom to zero mean and unit variance,
//   y = (x - mean_c) / sqrt(var_c + eps),
// with the statistics taken over every axis but the channel one (all items and positions).
//
// batch_norm_param:
//   use_global_stats         normalise with the stored statistics instead of the batch's (default: true in the
//                            TEST phase, false in TRAIN)
//   moving_average_fraction  decay of the running sums (default 0.999)
//   eps                      added to the variance before the square root (default 1e-5)
// Bottoms -> tops: 1 -> 1 (in place allowed), the top of the bottom's shape. A 1-axis bottom is one channel.
// Blobs (Caffe's order and shapes, so stored models load): running mean sum (C), running variance sum (C), and
// a scale factor (1). The stored statistics are the sums divided by the factor (a 0 factor gives 0).
// Every forward with batch statistics updates them: sum = sum * fraction + batch statistic (the variance with
// the unbiased m / (m - 1) correction, m values per channel), factor = factor * fraction + 1.
// The blobs are not learned: like Caffe, the layer gives them ParamSpecs with lr_mult 0 (and, where it adds
// them, decay_mult 0), refuses an lr_mult other than 0, never writes their gradient, and sets
// param_propagate_down false for them, so no solver moves them.
// Backward goes through the batch statistics when they are used, and through the fixed affine transform
// otherwise. The normalised values and 1 / sqrt(var + eps) are internal blobs (`<layer>.normalized`,
// `<layer>.inv_std`), so a later in-place layer may overwrite the top.
// The native engine runs on the CPU (loops over channels, sums in double) and on the GPU (the rules below, which
// batch_norm.cu compiles, the per-channel sums each one pass over the values they read: core/channel_sums.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/channel_sums.hpp"
#include "core/element_type.hpp"
#include "core/elementwise.hpp"
#include "layers/layer.hpp"

namespace crema {

// Channel c's statistics from the stored sums: mean and 1 / sqrt(var + eps), the sums divided by the scale factor
// (0 where the factor is 0).
struct BatchNormStoredRule {
  const float* mean_sum;
  const float* variance_sum;
  const float* factor;
  float* mean;
  float* inv_std;
  float eps;
  CREMA_HOST_DEVICE void operator()(int c) const {
    const float scale = factor[0] == 0.f ? 0.f : 1.f / factor[0];
    mean[c] = mean_sum[c] * scale;
    inv_std[c] = 1.f / sqrtf(variance_sum[c] * scale + eps);
  }
};

// Adds channel c's batch statistics to the running sums (the variance times the unbiased correction: 1 where the
// variance given is unbiased already, as cuDNN's) and, unless inv_std is null, gives 1 / sqrt(var + eps); channel 0
// also moves the scale factor.
struct BatchNormUpdateRule {
  const float* mean;
  const float* variance;
  float* mean_sum;
  float* variance_sum;
  float* factor;
  float* inv_std;
  float fraction, correction, eps;
  CREMA_HOST_DEVICE void operator()(int c) const {
    mean_sum[c] = mean_sum[c] * fraction + mean[c];
    variance_sum[c] = variance_sum[c] * fraction + correction * variance[c];
    if (c == 0) factor[0] = factor[0] * fraction + 1.f;
    if (inv_std != nullptr) inv_std[c] = 1.f / sqrtf(variance[c] + eps);
  }
};

// The input as GPU code's rules read it: value j of floats, or of 16-bit values widened (float16, or bfloat16 where
// `bfloat16`). A fused BatchNorm computing in half precision reads its input in that 16-bit type
// (BatchNormLayer::ReadsQuantized): from floats, `rounds` then rounds each value to it first, so a 16-bit blob and a
// float one give the same bits.
template <typename T>
struct BatchNormInputOf {
  const T* x;
  bool bfloat16 = false;
  bool rounds = false;
  CREMA_HOST_DEVICE float operator()(int j) const {
    if constexpr (std::is_same_v<T, float>)
      return rounds ? RoundedToHalf(bfloat16, x[j]) : x[j];
    else
      return FromHalf(bfloat16, x[j]);
  }
};

// The batch statistics' terms per channel (sum_per_channel, summed and divided by the m values per channel): the
// values themselves (the mean), then their squared distances from the mean (the biased variance).
template <typename T>
struct BatchNormValueTermsOf {
  static constexpr int kTerms = 1;
  BatchNormInputOf<T> x;
  CREMA_HOST_DEVICE void operator()(int j, int, float* terms) const { terms[0] = x(j); }
};
template <typename T>
struct BatchNormSquaredDeviationTermsOf {
  static constexpr int kTerms = 1;
  BatchNormInputOf<T> x;
  const float* mean;
  CREMA_HOST_DEVICE void operator()(int j, int c, float* terms) const {
    const float deviation = x(j) - mean[c];
    terms[0] = deviation * deviation;
  }
};

// The Scale and ReLU a BatchNorm runs for training (BatchNormLayer::AbsorbAffine), on a normalized value x_hat of
// channel c: z = gamma * x_hat + beta (no beta: no bias), then, where `relu`, the ReLU layer's rule at slope 0 (0 * z
// where z is not positive), as the CPU's fused loops (batch_norm_affine.hpp). No gamma: no Scale, y = x_hat.
struct BatchNormAffine {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  bool relu = false;
  CREMA_HOST_DEVICE float Z(float xhat, int c) const { return gamma[c] * xhat + (beta != nullptr ? beta[c] : 0.f); }
  CREMA_HOST_DEVICE float Forward(float xhat, int c) const {
    if (gamma == nullptr) return xhat;
    const float z = Z(xhat, c);
    return relu && !(z > 0.f) ? 0.f * z : z;
  }
  // The gradient reaching z from the top's dy: 0 * dy where the ReLU stopped it.
  CREMA_HOST_DEVICE float Reaching(float dy, float xhat, int c) const {
    return gamma != nullptr && relu && !(Z(xhat, c) > 0.f) ? 0.f * dy : dy;
  }
};

// x_hat = (x - mean) * inv_std, written to the normalised blob, and to the top through the fused Scale and ReLU where
// there are some (the top may be x: read before written); xhat may be the top where there are none. The input of type
// In as BatchNormInputOf reads it; the top's values of type Out: floats, or 16-bit values (float16, or bfloat16 where
// `bfloat16`), the floats rounded (a fused BatchNorm's top that the GPU's half-precision layers read:
// BatchNormLayer::WritesQuantized).
template <typename In, typename Out>
struct BatchNormNormalizeRuleOf {
  BatchNormInputOf<In> x;
  const float* mean;
  const float* inv_std;
  float* xhat;
  Out* y;
  int channels, spatial;
  BatchNormAffine affine = {};
  bool bfloat16 = false;
  CREMA_HOST_DEVICE void operator()(int j) const {
    const int c = j / spatial % channels;
    const float value = (x(j) - mean[c]) * inv_std[c];
    xhat[j] = value;
    StoreValue(bfloat16, affine.Forward(value, c), &y[j]);
  }
};

// y = the fused Scale and ReLU of the normalized values x_hat (cuDNN's engine, whose own call normalises), in floats or
// 16 bits as BatchNormNormalizeRuleOf.
template <typename T>
struct BatchNormAffineRuleOf {
  const float* xhat;
  T* y;
  int channels, spatial;
  BatchNormAffine affine;
  bool bfloat16 = false;
  CREMA_HOST_DEVICE void operator()(int j) const {
    StoreValue(bfloat16, affine.Forward(xhat[j], j / spatial % channels), &y[j]);
  }
};

// Backward's terms per channel, read in one pass (sum_per_channel): dz, the top's gradient dy as it reaches z through a
// fused Scale and ReLU (BatchNormAffine::Reaching; dy itself where there are none), and dz * x_hat. Their sums are a
// fused Scale's bias and scale gradients, and divided by m the means the input's gradient subtracts.
struct BatchNormGradientTerms {
  static constexpr int kTerms = 2;
  const float* dy;
  const float* xhat;
  BatchNormAffine affine;
  CREMA_HOST_DEVICE void operator()(int j, int c, float* terms) const {
    const float dz = affine.Reaching(dy[j], xhat[j], c);
    terms[0] = dz;
    terms[1] = dz * xhat[j];
  }
};

// dx = inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat)); with the stored statistics the means are absent
// (nullptr) and dx = inv_std * dy. With a fused Scale and ReLU, dy is the gradient reaching z and inv_std is
// multiplied by gamma. dx may be dy (in place).
struct BatchNormBackwardRule {
  const float* dy;
  const float* xhat;  // may be null with the stored statistics and no fused Scale
  const float* inv_std;
  const float* mean_dy;       // nullptr: stored statistics
  const float* mean_dy_xhat;  // nullptr: stored statistics
  float* dx;
  int channels, spatial;
  BatchNormAffine affine = {};
  CREMA_HOST_DEVICE void operator()(int j) const {
    const int c = j / spatial % channels;
    const bool fused = affine.gamma != nullptr;
    const float factor = fused ? inv_std[c] * affine.gamma[c] : inv_std[c];
    const float dz = fused ? affine.Reaching(dy[j], xhat[j], c) : dy[j];
    dx[j] = mean_dy == nullptr ? factor * dz : factor * (dz - mean_dy[c] - xhat[j] * mean_dy_xhat[c]);
  }
};

class BatchNormLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchNorm"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  // The native backward reads the normalized values and inverse deviations it kept; oneDNN's and cuDNN's read the
  // input, and say so.
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  // The normalized values are the top's, kept until backward: a Scale in place after it reads them (not once it runs
  // that Scale itself: its top is then the Scale's output).
  const Blob* KeptTop(int) const override { return absorbs_affine() ? nullptr : normalized_; }
  // Training moves the running statistics (a replay puts them back: updated once per iteration).
  bool ForwardUpdatesParams() const override { return !use_global_stats_; }
  // Its blobs are statistics, not learned (no gradient), and each thread sums whole channels.
  bool ThreadCountChangesPass(bool) const override { return false; }
  // With the stored statistics: scale 1 / sqrt(var + eps) and shift -mean / sqrt(var + eps) per channel.
  bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) const override;

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // Training's fusion on the CPU (net/fuse.hpp, the fuse_for_training pass): this layer also runs the learned
  // per-channel Scale in place after it (`scale`, and `bias` unless null) and, where `relu`, a ReLU of slope 0 in place
  // after that, whose steps go (layers/normalization/batch_norm_affine.hpp). Their blobs stay the Scale's: this layer
  // reads them and adds to their gradients where `learn_scale` and `learn_bias` say (the Scale's
  // param_propagate_down). The normalized values stay this layer's own, kept for backward.
  // In GPU code the GPU's rules do the same (BatchNormAffine), for the native engine and cuDNN's alike
  // (AbsorbsAffineInGpuCode).
  void AbsorbAffine(std::shared_ptr<Blob> scale, std::shared_ptr<Blob> bias, bool learn_scale, bool learn_bias,
                    bool relu);
  // Whether this engine's GPU code runs a fused Scale and ReLU (the native engine's rules, cuDNN's; not oneDNN's, a CPU
  // engine).
  virtual bool AbsorbsAffineInGpuCode() const { return true; }
  // In GPU code computing in float16 or bf16, with a Scale fused, it writes its top in that 16-bit type (the values the
  // readers would have rounded its floats to: a ResNet's convolution computing in that type, whose input the top is),
  // out of place: in place on its input (the convolution's output, in floats) it may leave its place for a top of its
  // own. Backward reads only the normalized values kept, in floats. (oneDNN's engine: its own, in bf16 on the CPU.)
  bool WritesQuantized(int, ElementType type) const override {
    return absorbs_affine() && RunsGpuCode() && WritesHalfTop(GpuCodePrecision(), type);
  }
  bool MayLeavePlace(int) const override { return ReadsHalfInGpuCode(); }
  // So fused in GPU code computing in float16 or bf16, it also reads its input in that type, as the convolutions do
  // theirs: the convolution before it may then write its output in 16 bits (a blob in floats is rounded to them first,
  // so the training is the same bit for bit). The statistics are taken over those values, in floats.
  Quantization ReadsQuantized(int) const override { return HalfInput(ReadsHalfInGpuCode()); }
  bool ReadsHalfInGpuCode() const {
    return absorbs_affine() && RunsGpuCode() && GpuCodePrecision() != Precision::kFloat32;
  }
  bool absorbs_affine() const { return affine_scale_ != nullptr; }
  bool absorbs_relu() const { return affine_relu_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

  // What every engine shares. SetUpStatistics: LayerSetUp without the internal blobs (parameters, the three
  // statistics blobs and their ParamSpecs). ReadShape: Reshape's checks, the sizes below and the top's shape.
  void SetUpStatistics(const std::vector<Blob*>& bottom);
  void ReadShape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  // The stored statistics: the sums divided by the scale factor (0 where the factor is 0).
  void StoredStatistics(float* mean, float* variance) const;
  // Adds a batch's statistics (its mean and biased variance per channel) to the running sums.
  void UpdateStatistics(const float* mean, const float* variance);
  // 1 / sqrt(var + eps) per channel, on the host.
  void InverseDeviations(const float* variance, float* inv_std) const {
    for (int c = 0; c < channels_; ++c) inv_std[c] = 1.f / std::sqrt(variance[c] + eps_);
  }
  int Channels(const Blob& bottom) const { return bottom.num_axes() == 1 ? 1 : bottom.shape(1); }

  bool use_global_stats_ = false;
  float fraction_ = 0.999f;
  float eps_ = 1e-5f;
  int num_ = 0, channels_ = 0, spatial_ = 0;
  Blob* normalized_ = nullptr;  // x_hat, kept for backward
  Blob* inv_std_ = nullptr;     // 1 / sqrt(var + eps) per channel

  // AbsorbAffine's: y = max(0, scale * x_hat + bias) from the normalized values, into the top's data, in its layout
  // and element type (floats, or bf16 where the net planned it: WritesQuantized).
  void AffineForward(Blob* top) const;
  // The bf16 rule's forward (an engine's choice, OneDnnBatchNormLayer's): x_hat from the bottom rounded to bf16 and the
  // batch's or the stored statistics (`mean`, `inv_std` per channel), kept in bf16 in the normalized blob (whose type
  // says which rule backward runs), and the top from it through the fused Scale and ReLU
  // (layers/normalization/batch_norm_affine.hpp).
  void Bfloat16Forward(const Blob& bottom, const float* mean, const float* inv_std, Blob* top) const;
  // The CPU's backward from the normalized values and inverse deviations kept, in the top's layout
  // (layers/normalization/batch_norm_affine.hpp), through the Scale and ReLU where it runs them: the bottom's gradient
  // (unless `propagate_down` is false; in floats, or bf16 where the net planned it: WritesBottomDiffInBfloat16) and the
  // Scale's gradients; by the bf16 rule where the normalized values were kept in bf16. The bottom may be the top (in
  // place, in floats).
  void BackwardLoops(const Blob& top, bool propagate_down, Blob* bottom) const;
  // GPU code: the fused Scale and ReLU on the layer's device (none where it runs none).
  BatchNormAffine GpuAffine() const;
  // GPU code's forward by the native rules: the stored statistics, or the batch's (which move the running sums), as
  // `mean` and inv_std_, then x_hat into `xhat` and the top through the fused Scale and ReLU (in floats or 16 bits, as
  // the top lies). The input in floats or 16 bits (ReadsQuantized), as it lies. `xhat` may be the top's floats where
  // nothing is fused. With batch statistics it uses the workspace GpuWorkspaceFloats asks for.
  void NormalizeGpu(const Blob& bottom, Blob* top, float* mean, float* xhat);
  // GPU code's backward through the fused Scale and ReLU, from the normalized values `normalized` and inv_std_: the
  // Scale's gradients (added, where learned) and, where `propagate_down`, the bottom's (which may be the top). Uses the
  // workspace GpuWorkspaceFloats asks for.
  void AffineBackwardGpu(const Blob& top, bool propagate_down, const Blob& normalized, Blob* bottom);
  // The workspace the native engine's GPU code needs (statistics, sums and their terms).
  size_t GpuWorkspaceFloats(const Blob& bottom) const;
  std::shared_ptr<Blob> affine_scale_, affine_bias_;
  bool learn_scale_ = false, learn_bias_ = false, affine_relu_ = false;
};

}  // namespace crema
