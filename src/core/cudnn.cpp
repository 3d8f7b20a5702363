// The cuDNN adapter's calls (see cudnn.hpp): the only file of crema that calls cuDNN.
#include "core/cudnn.hpp"

#ifdef CREMA_USE_CUDNN

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>

#include "core/common.hpp"
#include "core/context.hpp"

// Every cuDNN call goes through this, so an error names the call as written here.
#define CREMA_CUDNN_CALL(call) ::crema::cudnn::Check((call), #call)

namespace crema {
namespace cudnn {

void Check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  // cuDNN 9 keeps a more specific message than the status's name for the calling thread.
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  CREMA_FAIL() << "cuDNN call " << call << " failed: " << cudnnGetErrorString(status)
               << (detail[0] != '\0' ? std::string(" (") + detail + ")" : std::string());
}

cudnnHandle_t CreateHandle(cudaStream_t stream) {
  cudnnHandle_t handle = nullptr;
  CREMA_CUDNN_CALL(cudnnCreate(&handle));
  const cudnnStatus_t bound = cudnnSetStream(handle, stream);
  if (bound != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(handle);
    Check(bound, "cudnnSetStream(handle, stream)");
  }
  return handle;
}

void DestroyHandle(cudnnHandle_t handle) noexcept { cudnnDestroy(handle); }

size_t Version() { return cudnnGetVersion(); }

namespace {

std::string Joined(const std::vector<int>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i == 0 ? "" : "x") << values[i];
  return out.str();
}

std::string Mib(size_t bytes) {
  std::ostringstream out;
  out << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return out.str();
}

}  // namespace

// ---- descriptors -----------------------------------------------------------------------------------------------

TensorDescriptor::TensorDescriptor() { CREMA_CUDNN_CALL(cudnnCreateTensorDescriptor(&descriptor_)); }
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(descriptor_); }

cudnnDataType_t DataTypeOf(Precision precision) {
  switch (precision) {
    case Precision::kFloat16:
      return CUDNN_DATA_HALF;
    case Precision::kBfloat16:
      return CUDNN_DATA_BFLOAT16;
    case Precision::kFloat32:
      break;
  }
  return CUDNN_DATA_FLOAT;
}

void TensorDescriptor::SetPacked(const std::vector<int>& shape, cudnnDataType_t type) {
  CREMA_CHECK(!shape.empty() && shape.size() <= CUDNN_DIM_MAX)
      << "cuDNN tensors have 1 to " << CUDNN_DIM_MAX << " axes; this one has the shape " << Joined(shape);
  std::vector<int> dims = shape;
  while (dims.size() < 4) dims.push_back(1);
  for (int dim : dims) CREMA_CHECK(dim >= 1) << "cuDNN cannot describe the empty tensor " << Joined(shape);
  if (dims.size() == 4) {
    CREMA_CUDNN_CALL(
        cudnnSetTensor4dDescriptor(descriptor_, CUDNN_TENSOR_NCHW, type, dims[0], dims[1], dims[2], dims[3]));
    return;
  }
  std::vector<int> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  CREMA_CUDNN_CALL(
      cudnnSetTensorNdDescriptor(descriptor_, type, static_cast<int>(dims.size()), dims.data(), strides.data()));
}

FilterDescriptor::FilterDescriptor() { CREMA_CUDNN_CALL(cudnnCreateFilterDescriptor(&descriptor_)); }
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(descriptor_); }

void FilterDescriptor::Set(const std::vector<int>& shape, cudnnDataType_t type) {
  CREMA_CHECK(shape.size() >= 3 && shape.size() <= CUDNN_DIM_MAX)
      << "cuDNN filters have 3 to " << CUDNN_DIM_MAX << " axes; this one has the shape " << Joined(shape);
  CREMA_CUDNN_CALL(
      cudnnSetFilterNdDescriptor(descriptor_, type, CUDNN_TENSOR_NCHW, static_cast<int>(shape.size()), shape.data()));
}

ConvolutionDescriptor::ConvolutionDescriptor() { CREMA_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&descriptor_)); }
ConvolutionDescriptor::~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(descriptor_); }

void ConvolutionDescriptor::Set(const std::vector<int>& pad, const std::vector<int>& stride,
                                const std::vector<int>& dilation, int groups, cudnnDataType_t data_type) {
  CREMA_CHECK(!pad.empty() && pad.size() == stride.size() && pad.size() == dilation.size())
      << "a cuDNN convolution needs one pad, stride and dilation per spatial axis";
  // Caffe's convolution does not flip the kernel: cuDNN's cross-correlation. The compute type is float for every data
  // type: 16-bit tensors are cuDNN's "pseudo half" configurations (16-bit values, float32 sums), not its true-half one.
  CREMA_CUDNN_CALL(cudnnSetConvolutionNdDescriptor(descriptor_, static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                   dilation.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CREMA_CUDNN_CALL(cudnnSetConvolutionGroupCount(descriptor_, groups));
  // With CUDNN_DEFAULT_MATH, cuDNN 8 and later run float convolutions on Ampere's and Hopper's tensor cores in TF32
  // (10-bit mantissas): results a thousandth apart from the other engines', beyond float rounding. FMA math keeps
  // cuDNN on float arithmetic, so the engine gives the native engine's results. 16-bit values are what the tensor
  // cores are for (CUDNN_TENSOR_OP_MATH).
  CREMA_CUDNN_CALL(
      cudnnSetConvolutionMathType(descriptor_, data_type == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
}

PoolingDescriptor::PoolingDescriptor() { CREMA_CUDNN_CALL(cudnnCreatePoolingDescriptor(&descriptor_)); }
PoolingDescriptor::~PoolingDescriptor() { cudnnDestroyPoolingDescriptor(descriptor_); }

void PoolingDescriptor::Set2d(PoolingMode mode, bool deterministic, int window_h, int window_w, int pad_h, int pad_w,
                              int stride_h, int stride_w) {
  const cudnnPoolingMode_t cudnn_mode = mode == PoolingMode::kAverageIncludingPadding
                                            ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                        : CUDNN_POOLING_MAX;
  // A NaN in a window makes its output NaN, so that a net's check for non-finite values finds the layer.
  CREMA_CUDNN_CALL(cudnnSetPooling2dDescriptor(descriptor_, cudnn_mode, CUDNN_PROPAGATE_NAN, window_h, window_w, pad_h,
                                               pad_w, stride_h, stride_w));
}

std::vector<int> PoolingDescriptor::OutputShape(const TensorDescriptor& input) const {
  std::vector<int> shape(4);
  CREMA_CUDNN_CALL(
      cudnnGetPooling2dForwardOutputDim(descriptor_, input.get(), &shape[0], &shape[1], &shape[2], &shape[3]));
  return shape;
}

ActivationDescriptor::ActivationDescriptor() { CREMA_CUDNN_CALL(cudnnCreateActivationDescriptor(&descriptor_)); }
ActivationDescriptor::~ActivationDescriptor() { cudnnDestroyActivationDescriptor(descriptor_); }

void ActivationDescriptor::Set(ActivationMode mode) {
  const cudnnActivationMode_t cudnn_mode = mode == ActivationMode::kSigmoid ? CUDNN_ACTIVATION_SIGMOID
                                           : mode == ActivationMode::kTanh  ? CUDNN_ACTIVATION_TANH
                                                                            : CUDNN_ACTIVATION_RELU;
  // The coefficient is the ceiling of clipped ReLU and ELU's alpha; ReLU, sigmoid and tanh ignore it. NaNs pass
  // through as in the native engines.
  CREMA_CUDNN_CALL(cudnnSetActivationDescriptor(descriptor_, cudnn_mode, CUDNN_PROPAGATE_NAN, 0.0));
}

LRNDescriptor::LRNDescriptor() { CREMA_CUDNN_CALL(cudnnCreateLRNDescriptor(&descriptor_)); }
LRNDescriptor::~LRNDescriptor() { cudnnDestroyLRNDescriptor(descriptor_); }

void LRNDescriptor::Set(unsigned window, double alpha, double beta, double k) {
  CREMA_CUDNN_CALL(cudnnSetLRNDescriptor(descriptor_, window, alpha, beta, k));
}

// ---- convolution algorithms --------------------------------------------------------------------------------------

const char* DirectionName(Direction direction) {
  switch (direction) {
    case Direction::kForward:
      return "forward";
    case Direction::kBackwardData:
      return "backward-data";
    case Direction::kBackwardFilter:
      return "backward-filter";
  }
  return "?";
}

bool ConvolutionKey::operator<(const ConvolutionKey& other) const {
  return std::tie(device, input, filter, pad, stride, dilation, groups, data_type) <
         std::tie(other.device, other.input, other.filter, other.pad, other.stride, other.dilation, other.groups,
                  other.data_type);
}

bool ConvolutionKey::operator==(const ConvolutionKey& other) const { return !(*this < other) && !(other < *this); }

std::string ConvolutionKey::ToString() const {
  std::ostringstream out;
  out << "GPU " << device << ", input " << Joined(input) << ", filter " << Joined(filter) << ", pad " << Joined(pad)
      << ", stride " << Joined(stride) << ", dilation " << Joined(dilation) << ", groups " << groups << ", "
      << (data_type == CUDNN_DATA_FLOAT      ? std::string("float")
          : data_type == CUDNN_DATA_HALF     ? std::string("float16")
          : data_type == CUDNN_DATA_BFLOAT16 ? std::string("bfloat16")
                                             : "data type " + std::to_string(data_type));
  return out.str();
}

const AlgorithmCandidate* ChooseAlgorithm(const AlgorithmRanking& ranking, size_t limit, bool deterministic) {
  for (const AlgorithmCandidate& candidate : ranking)
    if (candidate.workspace_bytes <= limit && (!deterministic || candidate.deterministic)) return &candidate;
  return nullptr;
}

AlgorithmRanking AlgorithmCache::Find(const ConvolutionKey& key, Direction direction, bool measured,
                                      const std::function<AlgorithmRanking()>& rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto entry = std::make_tuple(key, direction, measured);
  auto found = rankings_.find(entry);
  if (found == rankings_.end()) found = rankings_.emplace(entry, rank()).first;
  return found->second;
}

size_t AlgorithmCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rankings_.size();
}

void AlgorithmCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  rankings_.clear();
}

AlgorithmCache& AlgorithmCache::Global() {
  static AlgorithmCache* cache = new AlgorithmCache;  // never destroyed: contexts may outlive static destruction
  return *cache;
}

namespace {

// How the algorithms are ranked (Context::cudnn_algorithms): by cuDNN's measurements on this GPU
// (cudnnFind*Algorithm, the default), or by cuDNN's heuristics (cudnnGet*Algorithm_v7). The engines choose in
// Reshape, when the net has not yet sized its shared workspace (it does so from the layers' requests, which depend
// on the choice) and the blobs hold no data worth timing: the measuring calls run every algorithm on memory cuDNN
// allocates for the purpose and frees again, once per shape, direction and GPU in the process (AlgorithmCache),
// fastest first. Heuristics cost microseconds and no device memory and give the same choice on every run, where
// timings give one that can change with the machine's noise (two runs may then take different algorithms, and
// different bits; deterministic mode ranks by the heuristics). On an H200, GoogLeNet's training (batch 128) ran at
// 1.00x PyTorch's speed with cudnn.benchmark on measured choices, 0.83x on the heuristics' (that run also waited
// for the device after every layer; docs/gpu-record.md, runs 3 and 4). Either way each algorithm that cuDNN supports
// here is kept with the workspace its own query reports for the descriptors as they are (FMA math, also while
// measuring: the descriptor's math type).
//
// Left out: WINOGRAD_NONFUSED, in every direction. NVIDIA's engineers say its numerical precision is sometimes
// not very good (TensorFlow skipped it for that reason); the engine must give the native engine's results to float
// rounding.
// Marked non-deterministic whatever the perf result says: the algorithms cuDNN's header documents as summing with
// atomics (backward-data ALGO_0, backward-filter ALGO_0 and ALGO_3).

template <typename Perf>
bool Listed(const AlgorithmRanking& ranking, const Perf& perf) {
  return std::any_of(ranking.begin(), ranking.end(),
                     [&](const AlgorithmCandidate& c) { return c.algorithm == static_cast<int>(perf.algo); });
}

// cuDNN's ranked results of one direction, kept where they ran and are not `excluded`, each algorithm once,
// with its workspace (`workspace(algo, &bytes)`, a cuDNN status) and whether it is deterministic (never for
// `uses_atomics(algo)`, whatever the result says).
template <typename Perf, typename Algo, typename Workspace, typename UsesAtomics>
AlgorithmRanking Ranking(const std::vector<Perf>& perfs, int returned, Algo excluded, Workspace workspace,
                         UsesAtomics uses_atomics) {
  AlgorithmRanking ranking;
  for (int i = 0; i < returned; ++i) {
    const Perf& perf = perfs[i];
    if (perf.status != CUDNN_STATUS_SUCCESS || perf.algo == excluded || Listed(ranking, perf)) continue;
    size_t bytes = 0;
    if (workspace(perf.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    ranking.push_back(
        {static_cast<int>(perf.algo), bytes, perf.determinism == CUDNN_DETERMINISTIC && !uses_atomics(perf.algo)});
  }
  return ranking;
}

AlgorithmRanking RankForward(cudnnHandle_t handle, bool measured, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                             cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
  int most = 0;
  CREMA_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &most));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(std::max(most, 1));
  int returned = 0;
  const int count = static_cast<int>(perfs.size());
  if (measured) {
    CREMA_CUDNN_CALL(cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, count, &returned, perfs.data()));
  } else {
    CREMA_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, count, &returned, perfs.data()));
  }
  return Ranking(
      perfs, returned, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, algo, bytes);
      },
      [](cudnnConvolutionFwdAlgo_t) { return false; });
}

AlgorithmRanking RankBackwardData(cudnnHandle_t handle, bool measured, cudnnFilterDescriptor_t w,
                                  cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,
                                  cudnnTensorDescriptor_t dx) {
  int most = 0;
  CREMA_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &most));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(std::max(most, 1));
  int returned = 0;
  const int count = static_cast<int>(perfs.size());
  if (measured) {
    CREMA_CUDNN_CALL(
        cudnnFindConvolutionBackwardDataAlgorithm(handle, w, dy, conv, dx, count, &returned, perfs.data()));
  } else {
    CREMA_CUDNN_CALL(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, count, &returned, perfs.data()));
  }
  return Ranking(
      perfs, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, dy, conv, dx, algo, bytes);
      },
      [](cudnnConvolutionBwdDataAlgo_t algo) { return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; });
}

AlgorithmRanking RankBackwardFilter(cudnnHandle_t handle, bool measured, cudnnTensorDescriptor_t x,
                                    cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,
                                    cudnnFilterDescriptor_t dw) {
  int most = 0;
  CREMA_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &most));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(std::max(most, 1));
  int returned = 0;
  const int count = static_cast<int>(perfs.size());
  if (measured) {
    CREMA_CUDNN_CALL(
        cudnnFindConvolutionBackwardFilterAlgorithm(handle, x, dy, conv, dw, count, &returned, perfs.data()));
  } else {
    CREMA_CUDNN_CALL(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, dy, conv, dw, count, &returned, perfs.data()));
  }
  return Ranking(
      perfs, returned, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, dy, conv, dw, algo, bytes);
      },
      [](cudnnConvolutionBwdFilterAlgo_t algo) {
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
      });
}

}  // namespace

void ConvolutionPlan::Describe(const ConvolutionKey& key, const std::vector<int>& output_shape,
                               const std::string& who) {
  const size_t axes = key.input.size();
  CREMA_CHECK(axes >= 4 && key.filter.size() == axes && key.pad.size() == axes - 2 && key.stride.size() == axes - 2 &&
              key.dilation.size() == axes - 2 && output_shape.size() == axes)
      << who << ": a cuDNN convolution needs matching input, filter and output shapes and one pad, stride and "
      << "dilation per spatial axis (" << key.ToString() << ", output " << Joined(output_shape) << ")";
  key_ = key;
  input_.SetPacked(key.input, key.data_type);
  output_.SetPacked(output_shape, key.data_type);
  filter_.Set(key.filter, key.data_type);
  convolution_.Set(key.pad, key.stride, key.dilation, key.groups, key.data_type);
  // cuDNN's output size is Caffe's formula too; a mismatch would be a description error here, so it is checked
  // once rather than trusted.
  std::vector<int> cudnn_shape(axes);
  CREMA_CUDNN_CALL(cudnnGetConvolutionNdForwardOutputDim(convolution_.get(), input_.get(), filter_.get(),
                                                         static_cast<int>(axes), cudnn_shape.data()));
  CREMA_CHECK(cudnn_shape == output_shape)
      << who << ": cuDNN computes the output shape " << Joined(cudnn_shape) << " for " << key.ToString()
      << ", where Caffe's is " << Joined(output_shape);
}

void ConvolutionPlan::ChooseAlgorithms(Context& context, const std::string& who) {
  cudnnHandle_t handle = context.cudnn();
  // The workspace the layer requests is a blob, of at most 2^31 - 1 floats, whatever the limit allows.
  const size_t blob_bytes = static_cast<size_t>(std::numeric_limits<int>::max()) * sizeof(float);
  const size_t limit = std::min(context.cudnn_workspace_limit(), blob_bytes);
  const bool deterministic = context.deterministic();
  // Timings can choose another algorithm on the next run, and another algorithm gives other bits: deterministic
  // mode keeps to the heuristics' choice, the same on every run.
  const bool measured = context.cudnn_algorithms() == Context::CudnnAlgorithms::kMeasured && !deterministic;
  const auto choose = [&](Direction direction, const std::function<AlgorithmRanking()>& rank) {
    const AlgorithmRanking ranking = AlgorithmCache::Global().Find(key_, direction, measured, rank);
    const AlgorithmCandidate* chosen = ChooseAlgorithm(ranking, limit, deterministic);
    if (chosen != nullptr) return *chosen;
    std::ostringstream why;
    why << who << ": no cuDNN " << DirectionName(direction) << " algorithm for " << key_.ToString();
    if (ranking.empty()) {
      why << ": cuDNN supports none for these shapes; run this layer with another engine (--engine=TYPE:im2col)";
    } else {
      size_t smallest = ~size_t{0};
      for (const AlgorithmCandidate& c : ranking)
        if (!deterministic || c.deterministic) smallest = std::min(smallest, c.workspace_bytes);
      if (smallest == ~size_t{0}) {
        why << " is deterministic (deterministic mode: CREMA_DETERMINISTIC=1 or Context::set_deterministic); "
            << "run this layer with another engine (--engine=TYPE:im2col)";
      } else {
        why << " fits the workspace limit of " << Mib(limit) << " (the smallest"
            << (deterministic ? " deterministic" : "") << " one needs " << Mib(smallest)
            << "); raise CREMA_CUDNN_WORKSPACE_LIMIT_MB or Context::set_cudnn_workspace_limit";
      }
    }
    CREMA_FAIL() << why.str();
    return AlgorithmCandidate{};
  };
  const AlgorithmCandidate forward = choose(Direction::kForward, [&] {
    return RankForward(handle, measured, input_.get(), filter_.get(), convolution_.get(), output_.get());
  });
  const AlgorithmCandidate backward_data = choose(Direction::kBackwardData, [&] {
    return RankBackwardData(handle, measured, filter_.get(), output_.get(), convolution_.get(), input_.get());
  });
  const AlgorithmCandidate backward_filter = choose(Direction::kBackwardFilter, [&] {
    return RankBackwardFilter(handle, measured, input_.get(), output_.get(), convolution_.get(), filter_.get());
  });
  forward_ = static_cast<cudnnConvolutionFwdAlgo_t>(forward.algorithm);
  forward_bytes_ = forward.workspace_bytes;
  backward_data_ = static_cast<cudnnConvolutionBwdDataAlgo_t>(backward_data.algorithm);
  backward_data_bytes_ = backward_data.workspace_bytes;
  backward_filter_ = static_cast<cudnnConvolutionBwdFilterAlgo_t>(backward_filter.algorithm);
  backward_filter_bytes_ = backward_filter.workspace_bytes;
}

size_t ConvolutionPlan::workspace_bytes(Direction direction) const {
  switch (direction) {
    case Direction::kForward:
      return forward_bytes_;
    case Direction::kBackwardData:
      return backward_data_bytes_;
    case Direction::kBackwardFilter:
      return backward_filter_bytes_;
  }
  return 0;
}

size_t ConvolutionPlan::largest_workspace_bytes() const {
  return std::max({forward_bytes_, backward_data_bytes_, backward_filter_bytes_});
}

int ConvolutionPlan::algorithm(Direction direction) const {
  switch (direction) {
    case Direction::kForward:
      return static_cast<int>(forward_);
    case Direction::kBackwardData:
      return static_cast<int>(backward_data_);
    case Direction::kBackwardFilter:
      return static_cast<int>(backward_filter_);
  }
  return -1;
}

void ConvolutionPlan::Forward(Context& context, const void* input, const void* filter, void* output, void* workspace,
                              float beta) const {
  const float alpha = 1.f;
  CREMA_CUDNN_CALL(cudnnConvolutionForward(context.cudnn(), &alpha, input_.get(), input, filter_.get(), filter,
                                           convolution_.get(), forward_, workspace, forward_bytes_, &beta,
                                           output_.get(), output));
}

void ConvolutionPlan::ForwardBiasReLU(Context& context, const float* input, const float* filter, bool sum,
                                      const TensorDescriptor& bias_desc, const float* bias,
                                      const ActivationDescriptor& relu, float* output, void* workspace) const {
  const float alpha = 1.f, alpha2 = sum ? 1.f : 0.f;
  CREMA_CUDNN_CALL(cudnnConvolutionBiasActivationForward(
      context.cudnn(), &alpha, input_.get(), input, filter_.get(), filter, convolution_.get(), forward_, workspace,
      forward_bytes_, &alpha2, output_.get(), output, bias_desc.get(), bias, relu.get(), output_.get(), output));
}

void ConvolutionPlan::BackwardData(Context& context, const void* output_diff, const void* filter, void* input_diff,
                                   void* workspace, float beta) const {
  const float alpha = 1.f;
  CREMA_CUDNN_CALL(cudnnConvolutionBackwardData(context.cudnn(), &alpha, filter_.get(), filter, output_.get(),
                                                output_diff, convolution_.get(), backward_data_, workspace,
                                                backward_data_bytes_, &beta, input_.get(), input_diff));
}

void ConvolutionPlan::BackwardFilter(Context& context, const void* input, const void* output_diff, void* filter_diff,
                                     void* workspace, float beta) const {
  const float alpha = 1.f;
  CREMA_CUDNN_CALL(cudnnConvolutionBackwardFilter(context.cudnn(), &alpha, input_.get(), input, output_.get(),
                                                  output_diff, convolution_.get(), backward_filter_, workspace,
                                                  backward_filter_bytes_, &beta, filter_.get(), filter_diff));
}

// ---- thin calls ------------------------------------------------------------------------------------------------

void AddBias(Context& context, const TensorDescriptor& bias_desc, const float* bias, const TensorDescriptor& y_desc,
             float* y) {
  const float alpha = 1.f, beta = 1.f;
  CREMA_CUDNN_CALL(cudnnAddTensor(context.cudnn(), &alpha, bias_desc.get(), bias, &beta, y_desc.get(), y));
}

void BiasGradient(Context& context, const TensorDescriptor& dy_desc, const float* dy, const TensorDescriptor& bias_desc,
                  float* bias_diff) {
  // beta = 1: parameter gradients accumulate, as in every engine (the net zeroes them before a backward pass).
  const float alpha = 1.f, beta = 1.f;
  CREMA_CUDNN_CALL(
      cudnnConvolutionBackwardBias(context.cudnn(), &alpha, dy_desc.get(), dy, &beta, bias_desc.get(), bias_diff));
}

void PoolingForward(Context& context, const PoolingDescriptor& pooling, const TensorDescriptor& x_desc, const float* x,
                    const TensorDescriptor& y_desc, float* y) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(
      cudnnPoolingForward(context.cudnn(), pooling.get(), &alpha, x_desc.get(), x, &beta, y_desc.get(), y));
}

void PoolingBackward(Context& context, const PoolingDescriptor& pooling, const TensorDescriptor& y_desc, const float* y,
                     const float* dy, const TensorDescriptor& x_desc, const float* x, float* dx) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnPoolingBackward(context.cudnn(), pooling.get(), &alpha, y_desc.get(), y, y_desc.get(), dy,
                                        x_desc.get(), x, &beta, x_desc.get(), dx));
}

void SoftmaxForward(Context& context, const TensorDescriptor& desc, const float* x, float* y) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnSoftmaxForward(context.cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                                       desc.get(), x, &beta, desc.get(), y));
}

void SoftmaxBackward(Context& context, const TensorDescriptor& desc, const float* y, const float* dy, float* dx) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnSoftmaxBackward(context.cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                                        desc.get(), y, desc.get(), dy, &beta, desc.get(), dx));
}

void ActivationForward(Context& context, const ActivationDescriptor& activation, const TensorDescriptor& desc,
                       const float* x, float* y) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(
      cudnnActivationForward(context.cudnn(), activation.get(), &alpha, desc.get(), x, &beta, desc.get(), y));
}

void ActivationBackward(Context& context, const ActivationDescriptor& activation, const TensorDescriptor& desc,
                        const float* y, const float* dy, const float* x, float* dx) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnActivationBackward(context.cudnn(), activation.get(), &alpha, desc.get(), y, desc.get(), dy,
                                           desc.get(), x, &beta, desc.get(), dx));
}

void LRNForward(Context& context, const LRNDescriptor& lrn, const TensorDescriptor& desc, const float* x, float* y) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnLRNCrossChannelForward(context.cudnn(), lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &alpha,
                                               desc.get(), x, &beta, desc.get(), y));
}

void LRNBackward(Context& context, const LRNDescriptor& lrn, const TensorDescriptor& desc, const float* y,
                 const float* dy, const float* x, float* dx) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnLRNCrossChannelBackward(context.cudnn(), lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &alpha,
                                                desc.get(), y, desc.get(), dy, desc.get(), x, &beta, desc.get(), dx));
}

// Spatial mode is Caffe's BatchNorm: statistics per channel over the items and every position. (SPATIAL_PERSISTENT,
// faster, may overflow on some value ranges, as cuDNN's header warns; PER_ACTIVATION keeps statistics per position.)
void DescribeBatchNormChannels(const TensorDescriptor& x, TensorDescriptor* channels) {
  CREMA_CUDNN_CALL(cudnnDeriveBNTensorDescriptor(channels->get(), x.get(), CUDNN_BATCHNORM_SPATIAL));
}

void BatchNormForwardTraining(Context& context, const TensorDescriptor& x_desc, const float* x, float* y,
                              const TensorDescriptor& channels, const float* scale, const float* bias, double factor,
                              float* running_mean, float* running_variance, double epsilon, float* saved_mean,
                              float* saved_inv_std) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnBatchNormalizationForwardTraining(
      context.cudnn(), CUDNN_BATCHNORM_SPATIAL, &alpha, &beta, x_desc.get(), x, x_desc.get(), y, channels.get(), scale,
      bias, factor, running_mean, running_variance, epsilon, saved_mean, saved_inv_std));
}

void BatchNormBackward(Context& context, const TensorDescriptor& x_desc, const float* x, const float* dy, float* dx,
                       const TensorDescriptor& channels, const float* scale, float* scale_diff, float* bias_diff,
                       double epsilon, const float* saved_mean, const float* saved_inv_std) {
  const float alpha = 1.f, beta = 0.f;
  CREMA_CUDNN_CALL(cudnnBatchNormalizationBackward(
      context.cudnn(), CUDNN_BATCHNORM_SPATIAL, &alpha, &beta, &alpha, &beta, x_desc.get(), x, x_desc.get(), dy,
      x_desc.get(), dx, channels.get(), scale, scale_diff, bias_diff, epsilon, saved_mean, saved_inv_std));
}

}  // namespace cudnn
}  // namespace crema

#endif  // CREMA_USE_CUDNN
