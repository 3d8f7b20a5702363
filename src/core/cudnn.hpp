// The cuDNN adapter: every call crema makes into cuDNN is in this file's source (cudnn.cpp), so that cuDNN's next
// change of API touches one place (cuDNN 8 removed the cudnnGet*Algorithm calls Caffe was built on, and Caffe
// stopped building for years). It is written against cuDNN 9's legacy descriptor API (cudnn_ops.h, cudnn_cnn.h),
// which cuDNN 9 marks deprecated in favour of its graph API; moving to the graph API later means rewriting
// cudnn.cpp, not the engines.
//
// What it offers: the status check; RAII descriptors (tensor, filter, convolution, pooling, activation, LRN);
// convolution algorithm choice, cached per shape and made under the context's workspace limit and deterministic
// mode (ConvolutionPlan); and thin forward/backward calls for convolution, bias, pooling, softmax, activation, LRN
// and batch normalisation, all on the context's cuDNN handle, which is bound to the context's CUDA stream.
//
// Tensors are crema's plain blobs, packed, the last axis varying fastest (cuDNN's NCHW and its N-d generalisation), of
// floats (CUDNN_DATA_FLOAT), but for the convolutions of an engine computing in half precision: their tensors and
// filters hold 16-bit values (CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16), computed with float32 sums on the tensor cores.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/element_type.hpp"

namespace crema {

class Context;

namespace cudnn {

// The data type of a convolution's tensors computing in `precision`: CUDNN_DATA_FLOAT, _HALF or _BFLOAT16.
cudnnDataType_t DataTypeOf(Precision precision);

// Throws crema::Error "cuDNN call <call> failed: <cuDNN's name for the status> (<cuDNN's last message>)" unless
// `status` is success.
void Check(cudnnStatus_t status, const char* call);

// A handle bound to `stream` (Context::cudnn() makes one per context), and its release.
cudnnHandle_t CreateHandle(cudaStream_t stream);
void DestroyHandle(cudnnHandle_t handle) noexcept;

// cuDNN's version at run time, as MAJOR * 10000 + MINOR * 100 + PATCH (cudnnGetVersion).
size_t Version();

// ---- descriptors ---------------------------------------------------------------------------------------------
// Each owns one cuDNN descriptor, created with the object and destroyed with it; Set* (re)describes it.

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  // A packed tensor of `shape` (of floats, or of `type`), 1 to 8 axes, each at least 1: shapes of fewer than 4 axes
  // are padded with trailing 1s (cuDNN's smallest tensors are 4-d).
  void SetPacked(const std::vector<int>& shape, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  cudnnTensorDescriptor_t get() const { return descriptor_; }

 private:
  cudnnTensorDescriptor_t descriptor_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  // Weights of `shape` (floats, or `type`): (outputs, inputs per group, kernel...), packed (Caffe's weight blobs).
  void Set(const std::vector<int>& shape, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  cudnnFilterDescriptor_t get() const { return descriptor_; }

 private:
  cudnnFilterDescriptor_t descriptor_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  // Caffe's convolution: cross-correlation (the kernel is not flipped), one pad, stride and dilation per spatial
  // axis, `groups` independent groups. Over tensors of `data_type`: floats on the FMA units (see cudnn.cpp: no
  // TF32); 16-bit values on the tensor cores, the sums in float32.
  void Set(const std::vector<int>& pad, const std::vector<int>& stride, const std::vector<int>& dilation, int groups,
           cudnnDataType_t data_type = CUDNN_DATA_FLOAT);
  cudnnConvolutionDescriptor_t get() const { return descriptor_; }

 private:
  cudnnConvolutionDescriptor_t descriptor_ = nullptr;
};

enum class PoolingMode {
  kMax,
  // The window's sum divided by its whole area, padding included (Caffe's AVE where no window overhangs the
  // padded input).
  kAverageIncludingPadding,
};

class PoolingDescriptor {
 public:
  PoolingDescriptor();
  ~PoolingDescriptor();
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  // 2-d pooling. `deterministic` picks cuDNN's deterministic MAX backward (no atomics).
  void Set2d(PoolingMode mode, bool deterministic, int window_h, int window_w, int pad_h, int pad_w, int stride_h,
             int stride_w);
  // The output shape cuDNN computes for a 4-d `input` (N, C, pooled H, pooled W).
  std::vector<int> OutputShape(const TensorDescriptor& input) const;
  cudnnPoolingDescriptor_t get() const { return descriptor_; }

 private:
  cudnnPoolingDescriptor_t descriptor_ = nullptr;
};

enum class ActivationMode {
  kReLU,     // y = max(x, 0)
  kSigmoid,  // y = 1 / (1 + exp(-x))
  kTanh,     // y = tanh(x)
};

class ActivationDescriptor {
 public:
  ActivationDescriptor();
  ~ActivationDescriptor();
  ActivationDescriptor(const ActivationDescriptor&) = delete;
  ActivationDescriptor& operator=(const ActivationDescriptor&) = delete;
  // The function `mode` names, NaNs passed on.
  void Set(ActivationMode mode);
  cudnnActivationDescriptor_t get() const { return descriptor_; }

 private:
  cudnnActivationDescriptor_t descriptor_ = nullptr;
};

// What cudnnSetLRNDescriptor accepts: a window of kLRNMinWindow to kLRNMaxWindow channels, k and beta at least
// these (compared as the doubles it is given).
constexpr unsigned kLRNMinWindow = CUDNN_LRN_MIN_N;
constexpr unsigned kLRNMaxWindow = CUDNN_LRN_MAX_N;
constexpr double kLRNMinK = CUDNN_LRN_MIN_K;
constexpr double kLRNMinBeta = CUDNN_LRN_MIN_BETA;

class LRNDescriptor {
 public:
  LRNDescriptor();
  ~LRNDescriptor();
  LRNDescriptor(const LRNDescriptor&) = delete;
  LRNDescriptor& operator=(const LRNDescriptor&) = delete;
  // Cross-channel LRN: y = x * (k + alpha / window * sum of x^2 over the window)^-beta, the window reaching
  // (window - 1) / 2 channels back and window - 1 - (window - 1) / 2 forward (centred for an odd window), channels
  // outside the tensor counting as 0. cuDNN divides alpha by the window itself, as Caffe does.
  void Set(unsigned window, double alpha, double beta, double k);
  cudnnLRNDescriptor_t get() const { return descriptor_; }

 private:
  cudnnLRNDescriptor_t descriptor_ = nullptr;
};

// ---- convolution algorithms ------------------------------------------------------------------------------------

// The three computations of one convolution: output from input (forward), input gradient from output gradient
// (backward data; a Deconvolution's forward), filter gradient.
enum class Direction { kForward, kBackwardData, kBackwardFilter };
const char* DirectionName(Direction direction);

// What cuDNN's choice of algorithm depends on: the GPU (heuristics differ between models; the ordinal stands for
// the model within a process), the convolution's input shape (N, C, spatial...), its filter shape (K, C / groups,
// kernel...), pads, strides, dilations, groups and the data type. (The math type follows the data type: FMA for
// floats, tensor cores for 16-bit values; a TF32 option would have to join the key.)
struct ConvolutionKey {
  int device = 0;
  std::vector<int> input, filter, pad, stride, dilation;
  int groups = 1;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;

  bool operator<(const ConvolutionKey& other) const;
  bool operator==(const ConvolutionKey& other) const;
  // "GPU 0, input 2x3x8x8, filter 4x3x3x3, pad 1x1, stride 1x1, dilation 1x1, groups 1, float" (or float16,
  // bfloat16)
  std::string ToString() const;
};

// One algorithm of one direction as the heuristics rank it: cuDNN's enum value, the workspace it needs for the
// key's shapes, and whether cuDNN's perf result says CUDNN_DETERMINISTIC.
struct AlgorithmCandidate {
  int algorithm = 0;
  size_t workspace_bytes = 0;
  bool deterministic = true;
};
using AlgorithmRanking = std::vector<AlgorithmCandidate>;

// The policy: the first of `ranking` (fastest expected first) whose workspace is within `limit` bytes and, where
// `deterministic`, that is deterministic; nullptr when none is. Falling down the list rather than failing is what
// keeps a net running under a small limit (implicit-GEMM algorithms need little or no workspace).
const AlgorithmCandidate* ChooseAlgorithm(const AlgorithmRanking& ranking, size_t limit, bool deterministic);

// Rankings per (key, direction, how ranked), computed once per shape and kept for the process: the ranking is a
// property of the GPU and the shapes, not of a net, so every net and context on a GPU shares it. The ranking is
// cached rather than the choice, so that contexts with other limits or determinism choose from the same entry.
// Thread-safe: contexts on several threads share one cache.
class AlgorithmCache {
 public:
  // The ranking for (key, direction) made by `measured` timings (true) or the heuristics (false), each kept apart:
  // made by `rank` on the first request, from the cache afterwards. `rank` runs under the cache's lock
  // (microseconds by heuristics, milliseconds measured: two measurements at once would disturb each other's
  // timings), so it is never run twice for one entry.
  AlgorithmRanking Find(const ConvolutionKey& key, Direction direction, bool measured,
                        const std::function<AlgorithmRanking()>& rank);
  size_t size() const;
  void Clear();
  // The process's cache, used by ConvolutionPlan.
  static AlgorithmCache& Global();

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<ConvolutionKey, Direction, bool>, AlgorithmRanking> rankings_;
};

// One convolution at one shape: its descriptors and its three algorithms, chosen under the context's workspace
// limit and deterministic mode. The convolution runs from `input` to `output` (for a Deconvolution, from its top
// to its bottom: its forward is BackwardData).
class ConvolutionPlan {
 public:
  ConvolutionPlan() = default;
  ConvolutionPlan(const ConvolutionPlan&) = delete;
  ConvolutionPlan& operator=(const ConvolutionPlan&) = delete;

  // Describes the convolution of `key` (its tensors and filter of key.data_type) and checks that cuDNN's output shape
  // is `output_shape` (Caffe's); errors begin with `who` ("layer 'conv1' (Convolution)").
  void Describe(const ConvolutionKey& key, const std::vector<int>& output_shape, const std::string& who);
  // Chooses the three algorithms (AlgorithmCache::Global(), ChooseAlgorithm) under `context`'s
  // cudnn_algorithms(), cudnn_workspace_limit() and deterministic(); throws naming the direction, the key and the limit
  // when no algorithm fits.
  void ChooseAlgorithms(Context& context, const std::string& who);
  // Bytes of workspace each direction's algorithm needs, and the most of them (what the layer requests).
  size_t workspace_bytes(Direction direction) const;
  size_t largest_workspace_bytes() const;
  // The chosen algorithm of `direction` (cuDNN's enum value), for logs and tests.
  int algorithm(Direction direction) const;

  const TensorDescriptor& input() const { return input_; }
  const TensorDescriptor& output() const { return output_; }

  // The pointers of Forward, BackwardData and BackwardFilter hold values of the key's data type: floats, or 16-bit
  // values (alpha and beta stay floats, the sums float32).
  // output = conv(input, filter) + beta * output
  void Forward(Context& context, const void* input, const void* filter, void* output, void* workspace,
               float beta) const;
  // output = relu(conv(input, filter) + (sum ? output : 0) + bias), one cudnnConvolutionBiasActivationForward with
  // the forward algorithm (ReLU in `relu`; the summand is what `output` holds, cuDNN's z aliasing y; `bias` has
  // `bias_desc` (1, C, 1, 1)).
  void ForwardBiasReLU(Context& context, const float* input, const float* filter, bool sum,
                       const TensorDescriptor& bias_desc, const float* bias, const ActivationDescriptor& relu,
                       float* output, void* workspace) const;
  // input_diff = conv^T(output_diff, filter) + beta * input_diff
  void BackwardData(Context& context, const void* output_diff, const void* filter, void* input_diff, void* workspace,
                    float beta) const;
  // filter_diff = dconv/dfilter(input, output_diff) + beta * filter_diff
  void BackwardFilter(Context& context, const void* input, const void* output_diff, void* filter_diff, void* workspace,
                      float beta) const;

 private:
  ConvolutionKey key_;
  TensorDescriptor input_, output_;
  FilterDescriptor filter_;
  ConvolutionDescriptor convolution_;
  cudnnConvolutionFwdAlgo_t forward_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t backward_data_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t backward_filter_ = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  size_t forward_bytes_ = 0, backward_data_bytes_ = 0, backward_filter_bytes_ = 0;
};

// ---- thin calls, each on the context's handle and stream ---------------------------------------------------------

// y += bias, `bias` a (1, C, 1, ...) tensor broadcast over y's other axes (cudnnAddTensor).
void AddBias(Context& context, const TensorDescriptor& bias_desc, const float* bias, const TensorDescriptor& y_desc,
             float* y);
// bias_diff += dy summed over every axis but the channels (cudnnConvolutionBackwardBias).
void BiasGradient(Context& context, const TensorDescriptor& dy_desc, const float* dy, const TensorDescriptor& bias_desc,
                  float* bias_diff);

// y = pool(x); dx = pool'(x, y, dy) (dx overwritten; dy has y's shape).
void PoolingForward(Context& context, const PoolingDescriptor& pooling, const TensorDescriptor& x_desc, const float* x,
                    const TensorDescriptor& y_desc, float* y);
void PoolingBackward(Context& context, const PoolingDescriptor& pooling, const TensorDescriptor& y_desc, const float* y,
                     const float* dy, const TensorDescriptor& x_desc, const float* x, float* dx);

// Softmax over axis 1 of `desc` (shaped outer x classes x inner x 1) at every other position, the maximum
// subtracted first (CUDNN_SOFTMAX_ACCURATE); backward overwrites dx with y * (dy - <dy, y>).
void SoftmaxForward(Context& context, const TensorDescriptor& desc, const float* x, float* y);
void SoftmaxBackward(Context& context, const TensorDescriptor& desc, const float* y, const float* dy, float* dx);

// y = act(x); dx = act'(x) * dy (dx overwritten). y == x and dx == dy are allowed (in place).
void ActivationForward(Context& context, const ActivationDescriptor& activation, const TensorDescriptor& desc,
                       const float* x, float* y);
void ActivationBackward(Context& context, const ActivationDescriptor& activation, const TensorDescriptor& desc,
                        const float* y, const float* dy, const float* x, float* dx);

// Cross-channel LRN over axis 1 of `desc` (4-d or 5-d); backward overwrites dx from the output y, its gradient dy
// and the input x.
void LRNForward(Context& context, const LRNDescriptor& lrn, const TensorDescriptor& desc, const float* x, float* y);
void LRNBackward(Context& context, const LRNDescriptor& lrn, const TensorDescriptor& desc, const float* y,
                 const float* dy, const float* x, float* dx);

// ---- batch normalisation (spatial: one mean and variance per channel, over every other axis) ------------------------

// The smallest epsilon cuDNN's batch normalisation takes.
constexpr double kBatchNormMinEpsilon = CUDNN_BN_MIN_EPSILON;

// Describes in *channels the (1, C, 1, 1) tensor of per-channel values (scale, bias, means, variances) that goes
// with `x` (N, C, ...) in spatial mode (cudnnDeriveBNTensorDescriptor).
void DescribeBatchNormChannels(const TensorDescriptor& x, TensorDescriptor* channels);

// With the batch's statistics: y = (x - mean) / sqrt(variance + epsilon) * scale + bias, the mean and the biased
// variance taken per channel over every other axis. The running tensors become factor * (the batch mean, the
// unbiased variance) + (1 - factor) * themselves. saved_mean and saved_inv_std receive cuDNN's cache for the backward
// pass (cuDNN documents their contents as its own). cuDNN does not document y == x: callers keep them apart.
void BatchNormForwardTraining(Context& context, const TensorDescriptor& x_desc, const float* x, float* y,
                              const TensorDescriptor& channels, const float* scale, const float* bias, double factor,
                              float* running_mean, float* running_variance, double epsilon, float* saved_mean,
                              float* saved_inv_std);
// The gradients of BatchNormForwardTraining (with the same x, scale, epsilon and saved cache): dx, scale_diff and
// bias_diff overwritten. cuDNN does not document dx == dy: callers keep them apart.
void BatchNormBackward(Context& context, const TensorDescriptor& x_desc, const float* x, const float* dy, float* dx,
                       const TensorDescriptor& channels, const float* scale, float* scale_diff, float* bias_diff,
                       double epsilon, const float* saved_mean, const float* saved_inv_std);

}  // namespace cudnn
}  // namespace crema

#endif  // CREMA_USE_CUDNN
