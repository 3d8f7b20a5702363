#include "layers/vision/onednn_convolution.hpp"

#ifdef CREMA_USE_ONEDNN

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/im2col.hpp"
#include "core/math_functions.hpp"
#include "core/threads.hpp"
#include "layers/onednn_util.hpp"
#include "layers/vision/bf16_winograd.hpp"

namespace crema {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::CpuEngine;
using onednn::Dims;
using onednn::RightPadding;

// Input channels (per group) below which the input gradient takes the GEMM steps rather than oneDNN's.
constexpr int kFewChannels = 8;
// The output positions (images x rows x columns) from which a training convolution takes Winograd's kernels
// (DescribeKind).
constexpr int64_t kWinogradTrainingPositions = 1024;
// The largest deconvolution stride the engine takes (see Refusal).
constexpr int kLargestDeconvolutionStride = 8;

// The primitives for the current shapes (convolution's or deconvolution's, behind oneDNN's common handles), the
// plain (crema) layouts, the reorders between them and the workspace regions each buffer takes.
struct OneDnnConvolutionLayer::Primitives {
  bool with_backward = false;  // the backward primitives are made (none for inference)
  bool one_thread = false;     // the forward is small work (SmallWork): made and run on one thread
  bool gemm_backward_data = false;
  // What the products compute in: in bfloat16, the primitives read bf16 copies of the input, the weights and the
  // output gradient, reordered from the float32 blobs, and write float32 (DescsIn).
  Precision precision = Precision::kFloat32;
  Layout offered = Layout::kPlain;  // the layout the forward primitive writes its output in, as crema names it
  memory::desc user_src, user_weights, user_bias, user_dst;
  // The gradients' layouts: the blobs' own, in float32 whatever type the data has (bf16 where the plan keeps it so);
  // the output gradient in bf16 where the plan keeps it so (ReadsTopDiffInBfloat16).
  memory::desc user_diff_src, user_diff_dst;
  bool reads_bf16_diff_dst = false;  // both backward passes read the output gradient in bf16
  dnnl::primitive_desc_base forward, backward_data, backward_weights;
  dnnl::primitive forward_primitive, backward_data_primitive, backward_weights_primitive;
  onednn::WeightCache weights;       // the forward's weights, in its layout
  bool data_reads_cached = false;    // the backward-data primitive wants the weights in the forward's layout
  // Else, a 1x1 convolution's weights for the backward-data primitive where crema writes its layout (a transposed
  // pair-blocked copy, registered with the weights: the solver's update writes it); else reordered in each pass.
  onednn::WeightCache data_weights_cache;
  bool data_weights_derived = false;
  // Both backward passes read the output gradient converted alike (bf16, another layout): converted once, into
  // backward_diff_dst, which the input gradient's phase leaves alone.
  bool shared_diff_dst = false;

  // 8-bit inference (QuantizationParameter): the input quantized by `quantize_src` into the forward's integer layout,
  // the weights by `int8_weights`; the forward is made again where the weights or the bias change, since the output
  // scales, which follow the weights, are fixed in the primitive (MakeInt8Forward).
  bool int8 = false;
  dnnl::reorder quantize_src;
  onednn::Int8Weights int8_weights;
  memory::desc int8_src, int8_weights_any, int8_dst;
  // The top's scale where the plan keeps it in 8 bits (plan_element_types), else 1: the output scales' factor.
  float top_scale = 1.f;
  // A fused sum in 8 bits adds what the output's memory holds, read as sum_type, times sum_scale. An 8-bit output:
  // its summand goes there in 8 bits (summand_target: the output's layout, the summand's 8-bit type, which the sum
  // reads as its own, sum_type), as it lies (copied, or there already: the memory plan's doing) or, from floats,
  // quantized as its readers quantize it (summand_scale, Layer::float_summand_quantization); sum_scale is the ratio of
  // the output's scale to the summand's. A float output: an 8-bit summand is dequantized there (summand_scale, 1 / its
  // scale). The summand's quantization as it was when the primitive was made.
  float sum_scale = 1.f, summand_scale = 1.f;
  memory::data_type sum_type = memory::data_type::undef;
  Quantization summand_quantization;
  memory::desc summand_target;
  memory::desc summand_from;  // what summand_reorder was made for
  dnnl::reorder summand_reorder;
  memory::dims strides, dilates, pad_left, pad_right;

  // The forward primitive's descriptors, queried once (each query costs some hundred nanoseconds, on every pass).
  memory::desc forward_src, forward_dst, forward_scratch_desc;
  onednn::Bindings forward_bindings, backward_bindings;  // the memories of the last call, kept for the next

  onednn::Regions regions;  // where each buffer lies in the workspace
  size_t src = 0, dst = 0, forward_scratch = 0;
  size_t backward_src = 0, backward_diff_dst = 0, computed_diff_weights = 0, diff_weights = 0, diff_bias = 0;
  size_t weights_scratch = 0;
  size_t data_weights = 0, data_diff_dst = 0, diff_src = 0, data_scratch = 0;
  size_t plain_diff_dst = 0;  // the GEMM input gradient's output gradient, plain, after its columns
  // The GEMM input gradient's bands: each image's column gradient is made and folded a few output rows at a time
  // (band_rows of them), in a stretch of the workspace per thread that stays in its L2 cache (`band_threads` such
  // stretches from `bands` on).
  int band_rows = 0, band_threads = 1;
  size_t bands = 0;
  // In bfloat16 (`gemm_bf16`), the products are oneDNN's bf16 matmuls (float32 sums) of the weights rounded to bf16
  // (`bf16_weights`, made again where they change) and the output gradient, plain in bf16 (`plain_bf16_diff_dst`),
  // for a whole band (`band_matmul`) and the last one (`last_band_matmul`, where its rows are fewer).
  bool gemm_bf16 = false;
  memory::desc plain_bf16_diff_dst;
  dnnl::matmul::primitive_desc band_matmul_desc, last_band_matmul_desc;
  dnnl::matmul band_matmul, last_band_matmul;
  size_t band_scratch = 0, band_scratch_bytes = 0;  // the matmuls' scratchpads, one per thread
  std::vector<uint16_t> bf16_weights;
  uint64_t bf16_weights_version = 0;
  const float* bf16_weights_source = nullptr;

  // A 3 x 3 convolution of stride 1 computing in bf16 over channel blocks of 16: its forward, and its backward passes
  // where there are some, by crema's bf16 Winograd (layers/vision/bf16_winograd.hpp) instead of oneDNN's direct
  // kernels; its workspace in each phase.
  std::unique_ptr<Bfloat16Winograd> winograd;
  bool winograd_backward = false;
  size_t winograd_forward = 0, winograd_weights = 0, winograd_data = 0;
};

namespace {

// The floats of one band of the column gradient (a few output rows' columns): about 256 KB, which stays in a core's L2
// cache between the product that writes it and the fold that reads it. Whole images' columns (CaffeNet's conv1: 4.4
// MB an image, GoogLeNet's 7.4) went out to memory and back.
constexpr size_t kBandFloats = 64 * 1024;

// Whether a 3x3 convolution of stride 1 runs by Winograd's minimal filtering (CREMA_ONEDNN_WINOGRAD: 0 never, 1
// wherever oneDNN has it, unset by default: in inference where it measures faster, in training where the
// convolution has output positions enough, DescribeKind).
enum class Winograd { kNever, kByDefault, kAlways };

Winograd WinogradSetting() {
  const char* setting = std::getenv("CREMA_ONEDNN_WINOGRAD");
  if (setting == nullptr) return Winograd::kByDefault;
  return std::string(setting) == "0" ? Winograd::kNever : Winograd::kAlways;
}

// One forward primitive on buffers of its own filled with zeros (the kernels' time does not depend on the values),
// run and timed.
class TimedForward {
 public:
  explicit TimedForward(const dnnl::primitive_desc_base& pd) : stream_(CpuEngine()), primitive_(pd.get()) {
    const auto add = [&](int argument, const memory::desc& desc) {
      if (desc.get_size() == 0) return;
      memory buffer(desc, CpuEngine());
      std::memset(buffer.get_data_handle(), 0, desc.get_size());
      args_[argument] = buffer;
    };
    add(DNNL_ARG_SRC, pd.src_desc(0));
    add(DNNL_ARG_WEIGHTS, pd.weights_desc(0));
    add(DNNL_ARG_BIAS, pd.weights_desc(1));
    add(DNNL_ARG_DST, pd.dst_desc(0));
    add(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc());
  }
  // Seconds of one run.
  double Run() {
    const auto start = std::chrono::steady_clock::now();
    primitive_.execute(stream_, args_);
    stream_.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  dnnl::stream stream_;
  dnnl::primitive primitive_;
  std::unordered_map<int, memory> args_;
};

std::string DimsText(const memory::desc& desc) {
  std::ostringstream text;
  for (const auto d : desc.dims()) text << d << 'x';
  return text.str();
}

// Whether Winograd's forward kernels beat the direct ones on this CPU by a margin (under 0.85 of their time, so that
// a close race does not flip between runs): measured once per process for each pair of kernels and shapes.
bool WinogradIsFaster(const dnnl::primitive_desc_base& winograd, const dnnl::primitive_desc_base& direct) {
  static std::mutex mutex;
  static std::map<std::string, bool> decided;
  const std::string key = DimsText(direct.src_desc(0)) + DimsText(direct.weights_desc(0)) +
                          DimsText(direct.dst_desc(0)) + (direct.weights_desc(1).get_size() ? "bias " : "") +
                          winograd.impl_info_str() + " " + direct.impl_info_str();
  const std::lock_guard<std::mutex> lock(mutex);
  const auto known = decided.find(key);
  if (known != decided.end()) return known->second;
  // Each once to warm up, then five runs of each in turn (so that a busy moment slows both), the fastest of each.
  TimedForward timed_winograd(winograd), timed_direct(direct);
  timed_winograd.Run();
  timed_direct.Run();
  double winograd_seconds = 1e30, direct_seconds = 1e30;
  for (int round = 0; round < 5; ++round) {
    winograd_seconds = std::min(winograd_seconds, timed_winograd.Run());
    direct_seconds = std::min(direct_seconds, timed_direct.Run());
  }
  const bool faster = winograd_seconds < 0.85 * direct_seconds;
  decided[key] = faster;
  return faster;
}

// The memory descriptors of one kind's passes: the forward's input and output, the gradients of both, the weights as
// the forward and the input gradient read them and the weights' gradient. In float32 all have one type; in bfloat16,
// what the products read (input, weights, output gradient) is bf16 and what they write (output, gradients) float32,
// the output bf16 where the plan keeps it so (`bf16_output`), and the input gradient too (`bf16_input_gradient`).
struct PassDescs {
  memory::desc src, dst, diff_src, diff_dst, weights, diff_weights;
};

PassDescs DescsIn(Precision precision, const memory::dims& src, const memory::dims& dst, const memory::dims& weights,
                  Tag activations, bool bf16_output, bool bf16_input_gradient) {
  const auto f32 = memory::data_type::f32;
  const auto read = precision == Precision::kBfloat16 ? memory::data_type::bf16 : f32;
  return {memory::desc(src, read, activations),
          memory::desc(dst, bf16_output ? memory::data_type::bf16 : f32, activations),
          memory::desc(src, bf16_input_gradient ? memory::data_type::bf16 : f32, activations),
          memory::desc(dst, read, activations),
          memory::desc(weights, read, Tag::any),
          memory::desc(weights, f32, Tag::any)};
}

// The elements `desc` holds, padding included (channels padded to whole blocks), whatever their type.
int64_t PaddedElements(const memory::desc& desc) {
  int64_t elements = 1;
  for (int i = 0; i < desc.data.ndims; ++i) elements *= desc.data.padded_dims[i];
  return elements;
}

// Whether `desc` lies without channel blocks (channels-last, or plain).
bool WithoutChannelBlocks(const memory::desc& desc) {
  return desc.data.format_kind == dnnl_blocked && desc.data.format_desc.blocking.inner_nblks == 0;
}

// Two faults of oneDNN 2.6's 1x1 kernels (Debian 12's), each over blobs without channel blocks, and avoided by
// channel-blocked layouts, which pad each block. Why `pass` (one of the layer's primitives) would compute wrong values
// or write past its memory; empty where it would not.
// - The bf16 kernels for stride 1 (jit_bf16_1x1) read the channels they sum over (the forward's input, the input
//   gradient's output gradient: `summed`) in pairs, and where a group has an odd number of them they err at some
//   spatial sizes (5 x 6 and 30 x 30 among them; an FCN's 21 scores, a one-channel map; tests/precision_cases.hpp).
// - The weight gradient of a strided 1x1 convolution (jit_1x1 on AVX2 CPUs such as a Zen 3; AVX-512 ones take other
//   kernels here) first gathers the input's strided pixels into per-thread space laid out for whole channel blocks,
//   but with fewer input channels than a block it places them as if the block were full: wrong weight gradients, or
//   writes past a thread's space.
enum class PassKind { kForward, kInputGradient, kWeightGradient };
std::string KernelFault(const dnnl::primitive_desc_base& pass, PassKind kind, const memory::desc& summed, int groups,
                        const memory::dims& strides) {
  const std::string kernel = pass.impl_info_str();
  if (kernel.find("1x1") == std::string::npos || !WithoutChannelBlocks(summed)) return "";
  const int64_t channels = summed.dims()[1] / groups;
  std::ostringstream why;
  why << "oneDNN's " << kernel << " kernel ";
  if (kind != PassKind::kWeightGradient && kernel.find("jit_bf16_1x1") != std::string::npos &&
      summed.data_type() == memory::data_type::bf16 && channels % 2 == 1) {
    why << "sums " << channels << " channels without channel blocks in pairs, which errs for an odd count";
    return why.str();
  }
  if (kind == PassKind::kWeightGradient && (strides[0] > 1 || strides[1] > 1) && channels < 16) {
    why << "gathers a strided input of " << channels << " channels without channel blocks into whole blocks' space";
    return why.str();
  }
  return "";
}

// The primitive descriptors of one kind (oneDNN's convolution or deconvolution classes, whose descriptors take the
// same arguments), with the activations and weights as `d` has them: the forward pass's, and the two backward passes'
// where `backward` asks for them. `winograd` says whether the passes may use Winograd's minimal filtering instead of
// the direct kernels, where oneDNN has it for these shapes, post-ops, types and CPU.
template <class Forward, class BackwardData, class BackwardWeights>
void DescribeKind(dnnl::algorithm algorithm, const PassDescs& d, const memory::desc* bias, const memory::dims& strides,
                  const memory::dims& dilates, const memory::dims& pad_left, const memory::dims& pad_right,
                  const FusedActivation& activation, bool sum, bool backward, Winograd winograd,
                  dnnl::primitive_desc_base* forward, dnnl::primitive_desc_base* backward_data,
                  dnnl::primitive_desc_base* backward_weights) {
  const dnnl::primitive_attr attr = onednn::UserScratchpad();  // the scratchpad comes from the workspace
  const dnnl::primitive_attr forward_attr = onednn::UserScratchpadWith(activation, sum);
  const dnnl::engine& engine = CpuEngine();
  const memory::desc bias_desc = bias ? *bias : memory::desc();  // an empty one: no bias
  const auto describe_with = [&](const dnnl::primitive_attr& with, dnnl::prop_kind kind, dnnl::algorithm how) {
    return typename Forward::primitive_desc(
        typename Forward::desc(kind, how, d.src, d.weights, bias_desc, d.dst, strides, dilates, pad_left, pad_right),
        with, engine);
  };
  const auto describe = [&](dnnl::prop_kind kind, dnnl::algorithm how) {
    return describe_with(forward_attr, kind, how);
  };
  // A fused activation is the forward's post-op (inference only: the layer then has no backward). The direct
  // forward keeps the training kind for inference too: oneDNN 2.6 answers the inference kind with its brgconv
  // kernels, measured 20% slower on ResNet-50 at batch 1 (36 ms against 30, AVX-512) than the jit kernels it picks
  // for training.
  const typename Forward::primitive_desc direct = describe(dnnl::prop_kind::forward_training, algorithm);
  *forward = direct;
  // Winograd's minimal filtering, where oneDNN has it for these shapes, post-ops and CPU (its rounding error is a few
  // times the direct kernels', docs/layers.md). Without a backward pass, the inference kind where it measures faster:
  // its weights, transformed once, are kept while they do not change (WeightCache), and its kernels took half the
  // direct ones' time on ResNet-50's 3x3 convolutions on a Zen 5 and on a Xeon (model 207).
  const auto try_winograd = [&](const auto& make) {
    if (winograd == Winograd::kNever) return;
    try {
      make();
    } catch (const dnnl::error&) {
      // none for these shapes, post-ops or CPU: the direct kernels
    }
  };
  if (!backward) {
    try_winograd([&] {
      const typename Forward::primitive_desc candidate =
          describe(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd);
      if (winograd == Winograd::kAlways || WinogradIsFaster(candidate, direct)) *forward = candidate;
    });
    return;
  }
  // The backward primitives take as their hint a forward without post-ops (a ReLU fused for training): with the
  // post-op's, oneDNN 2.6 set its backward kernels up slower (GoogLeNet's conv2/3x3: 65-79 ms against 48-58).
  const bool post_ops = activation.kind != FusedActivation::kNone || sum;
  const auto describe_backward = [&](dnnl::algorithm how, const typename Forward::primitive_desc& forward_hint,
                                     dnnl::primitive_desc_base* data, dnnl::primitive_desc_base* weights_pass) {
    *weights_pass = typename BackwardWeights::primitive_desc(
        bias ? typename BackwardWeights::desc(how, d.src, d.diff_weights, *bias, d.diff_dst, strides, dilates, pad_left,
                                              pad_right)
             : typename BackwardWeights::desc(how, d.src, d.diff_weights, d.diff_dst, strides, dilates, pad_left,
                                              pad_right),
        attr, engine, forward_hint);
    *data = typename BackwardData::primitive_desc(
        typename BackwardData::desc(how, d.diff_src, d.weights, d.diff_dst, strides, dilates, pad_left, pad_right),
        attr, engine, forward_hint);
  };
  const auto without_post_ops = [&](dnnl::algorithm how, const typename Forward::primitive_desc& with) {
    return post_ops ? describe_with(onednn::UserScratchpad(), dnnl::prop_kind::forward_training, how) : with;
  };
  describe_backward(algorithm, without_post_ops(algorithm, direct), backward_data, backward_weights);
  // Training transforms the weights in every pass, in the training kind's kernels (4x4 output tiles): worth it
  // where each weight meets many output positions (images x rows x columns). On the Xeon (model 207) at batch 8,
  // they took about half the direct kernels' time in each of the three passes at 64 channels over 56 x 56 and 128
  // over 28 x 28 (25088 and 6272 positions), two thirds at 256 over 14 x 14 (1568) and 0.9 at CaffeNet's 13 x 13
  // at batch 10 (1690), and were slower at 512 over 7 x 7 (392; docs/performance.md). The choice is that rule, not
  // a measurement: a training run and its resumption in another process must pick the same kernels to give the same
  // bits (a measurement on a busy machine can flip a close race).
  const memory::dims& out = d.dst.dims();
  if (winograd == Winograd::kByDefault && out[0] * out[2] * out[3] < kWinogradTrainingPositions) return;
  try_winograd([&] {
    const auto winograd_algorithm = dnnl::algorithm::convolution_winograd;
    const typename Forward::primitive_desc candidate = describe(dnnl::prop_kind::forward_training, winograd_algorithm);
    // Where oneDNN has no backward pair, the three passes stay direct.
    dnnl::primitive_desc_base data, weights_pass;
    describe_backward(winograd_algorithm, without_post_ops(winograd_algorithm, candidate), &data, &weights_pass);
    *forward = candidate;
    *backward_data = data;
    *backward_weights = weights_pass;
  });
}

}  // namespace

OneDnnConvolutionLayer::OneDnnConvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context,
                                               bool transposed)
    : BaseConvolutionLayer(param, std::move(context)), transposed_(transposed) {}

OneDnnConvolutionLayer::~OneDnnConvolutionLayer() = default;

std::vector<Layer::HeldBuffer> OneDnnConvolutionLayer::HeldBuffers() const {
  if (primitives_ && primitives_->int8)
    return {{"the weights quantized to 8 bits for oneDNN", primitives_->int8_weights.bytes(), Device::kCPU}};
  const size_t bytes = primitives_ ? primitives_->weights.bytes() : 0;
  std::vector<HeldBuffer> held;
  if (bytes > 0) held.push_back({"the weights reordered for oneDNN", bytes, Device::kCPU});
  if (primitives_ && primitives_->data_weights_derived)
    held.push_back(
        {"the weights in bf16 for the input gradient", primitives_->data_weights_cache.bytes(), Device::kCPU});
  if (primitives_ && primitives_->winograd)
    held.push_back({"the weights transformed for bf16 Winograd", primitives_->winograd->HeldBytes(), Device::kCPU});
  if (primitives_ && !primitives_->bf16_weights.empty())
    held.push_back({"the weights rounded to bf16 for the GEMM steps",
                    primitives_->bf16_weights.size() * sizeof(uint16_t), Device::kCPU});
  return held;
}

std::string OneDnnConvolutionLayer::Refusal(const EngineQuery& query) {
  const ConvolutionParameter& conv = query.param.convolution_param();
  if (query.bottom_shapes.empty()) return "";  // the layer's arity check names it
  const std::vector<int>& shape = query.bottom_shapes.at(0);
  const int axis = conv.axis() < 0 ? conv.axis() + static_cast<int>(shape.size()) : conv.axis();
  std::ostringstream why;
  if (shape.size() != 4 || axis != 1) {
    why << "oneDNN's engine takes 2-d " << (query.param.type() == "Deconvolution" ? "de" : "")
        << "convolutions of N x C x H x W bottoms over axis 1; this one has " << shape.size()
        << " axes and channel axis " << conv.axis();
    return why.str();
  }
  KernelGeometry g;
  try {
    g = ConvolutionGeometry(conv, 2, query.param.name());
  } catch (const Error&) {
    return "";  // the layer's own checks name what is wrong
  }
  if (query.param.type() == "Deconvolution") {
    // Its output size, stride * (in - 1) + extent - 2 * pad, is oneDNN's with pad on both sides. But oneDNN's
    // deconvolution forward is slow for large strides (FCN's 16x and 32x upsampling: 1.5-2.8x the im2col
    // engine's time, docs/performance.md), while it wins up to stride 8. CREMA_ONEDNN_DECONVOLUTION_STRIDES=N
    // moves the limit, for such comparisons (benchmarks/deconvolution_engines.sh).
    const char* limit_text = std::getenv("CREMA_ONEDNN_DECONVOLUTION_STRIDES");
    const int limit = limit_text == nullptr ? kLargestDeconvolutionStride : std::atoi(limit_text);
    for (int i = 0; i < 2; ++i) {
      if (g.stride[i] > limit) {
        why << "stride " << g.stride[i] << " is above " << limit
            << ", where oneDNN's deconvolution measured slower than the native engine";
        return why.str();
      }
    }
    return "";
  }
  for (int i = 0; i < 2; ++i) {
    const int in = shape[2 + i];
    const int out = (in + 2 * g.pad[i] - g.extent(i)) / g.stride[i] + 1;
    if (in + 2 * g.pad[i] - g.extent(i) <= -g.stride[i]) return "";  // no output: the layer's own error
    if (in + 2 * g.pad[i] < g.extent(i)) {
      why << "kernel extent " << g.extent(i) << " reaches past the padded input (" << in << " + 2 * pad " << g.pad[i]
          << ") along spatial axis " << i << ", which oneDNN's output-size arithmetic does not take";
      return why.str();
    }
    if (RightPadding(in, out, g.pad[i], g.extent(i), g.stride[i]) < 0) {
      why << "stride " << g.stride[i] << " leaves more of the input unused along spatial axis " << i
          << " than oneDNN's output-size arithmetic allows";
      return why.str();
    }
  }
  return "";
}

void OneDnnConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  BaseConvolutionLayer::Reshape(bottom, top);
  const Blob& input = *bottom[0];
  const int c = input.shape(1), h = input.shape(2), w = input.shape(3);
  const int oh = top[0]->shape(2), ow = top[0]->shape(3);
  const KernelGeometry& g = geometry_;
  const memory::dims strides = Dims({g.stride[0], g.stride[1]});
  const memory::dims dilates = Dims({g.dilation[0] - 1, g.dilation[1] - 1});  // oneDNN counts the gaps
  const memory::dims pad_left = Dims({g.pad[0], g.pad[1]});
  // A convolution's right pad makes oneDNN's output size Caffe's; a deconvolution's is its left one.
  const memory::dims pad_right =
      transposed_ ? pad_left
                  : Dims({RightPadding(h, oh, g.pad[0], g.extent(0), g.stride[0]),
                          RightPadding(w, ow, g.pad[1], g.extent(1), g.stride[1])});
  CREMA_CHECK(pad_right[0] >= 0 && pad_right[1] >= 0)
      << describe() << ": the onednn engine cannot reproduce this output size (its refusal should have said so)";

  auto p = std::make_unique<Primitives>();
  const auto f32 = memory::data_type::f32;
  // The blobs' layouts: plain, or those of a run of oneDNN layers (the net's plan_layouts pass). With several
  // bottoms, each pair is plain (ReadsLayout, OffersLayout).
  p->user_src = onednn::BlobDesc(input);
  p->user_dst = onednn::BlobDesc(*top[0]);
  p->user_diff_src =
      onednn::WithDataType(p->user_src, input.diff_type() == ElementType::kBfloat16 ? memory::data_type::bf16 : f32);
  p->user_diff_dst =
      onednn::WithDataType(p->user_dst, top[0]->diff_type() == ElementType::kBfloat16 ? memory::data_type::bf16 : f32);
  // oneDNN's weight dimensions are (outputs, inputs, kernel), with the groups first where there are several.
  // Caffe's convolution weights lie in that order; its deconvolution weights have the inputs (the bottom's
  // channels) first, which oneDNN names i-before-o.
  const int outputs = num_output_ / group_, inputs = c / group_;
  if (group_ == 1)
    p->user_weights = memory::desc(Dims({num_output_, c, g.kernel[0], g.kernel[1]}), f32,
                                   transposed_ ? Tag::iohw : Tag::oihw);
  else
    p->user_weights = memory::desc(Dims({group_, outputs, inputs, g.kernel[0], g.kernel[1]}), f32,
                                   transposed_ ? Tag::giohw : Tag::goihw);
  p->user_bias = memory::desc(Dims({num_output_}), f32, Tag::x);
  // The three primitives with the activations (input, output and their gradients) in layout `activations`.
  // The weight gradient comes in the primitive's own layout (asking for crema's plain one picks a GEMM-based
  // implementation, measured 3-6x slower), reordered to crema's before it is added to the blob's diff.
  // Without a backward pass (inference), only the forward primitive is made. A 3x3 convolution of stride 1 may take
  // Winograd's kernels (in training, in all three passes).
  const bool backward = backward_planned();
  const bool three_by_three = !transposed_ && group_ == 1 && g.kernel[0] == 3 && g.kernel[1] == 3 && g.stride[0] == 1 &&
                              g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1;
  const Winograd winograd = three_by_three ? WinogradSetting() : Winograd::kNever;
  const auto describe = [&](Tag activations, Precision precision) {
    const PassDescs d =
        DescsIn(precision, p->user_src.dims(), p->user_dst.dims(), p->user_weights.dims(), activations,
                top[0]->data_type() == ElementType::kBfloat16, input.diff_type() == ElementType::kBfloat16);
    const memory::desc* bias = bias_term_ ? &p->user_bias : nullptr;
    if (transposed_)
      DescribeKind<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                   dnnl::deconvolution_backward_weights>(
          dnnl::algorithm::deconvolution_direct, d, bias, strides, dilates, pad_left, pad_right, fused_activation_,
          fused_sum(), backward, Winograd::kNever, &p->forward, &p->backward_data, &p->backward_weights);
    else
      DescribeKind<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>(
          dnnl::algorithm::convolution_direct, d, bias, strides, dilates, pad_left, pad_right, fused_activation_,
          fused_sum(), backward, winograd, &p->forward, &p->backward_data, &p->backward_weights);
  };
  // oneDNN's own choice is a channel-blocked layout (16 channels a block with AVX-512, 8 with AVX2). Where the
  // channels do not fill whole blocks, the padding is computed too (LeNet's conv2: 20 inputs in 32, 50
  // outputs in 64, twice the arithmetic), and channels-last (NHWC) kernels, which have no padding, ran its
  // forward and backward 1.3-2x faster (docs/performance.md). CREMA_ONEDNN_ACTIVATIONS=blocked|nhwc forces one
  // layout, for such comparisons.
  const char* forced = std::getenv("CREMA_ONEDNN_ACTIVATIONS");
  const std::string layout = forced == nullptr ? "" : forced;
  // oneDNN's kernels split their work for the threads there are when they are made: a small forward is made for
  // one (and run on one, Forward_cpu).
  const double flops = 2.0 * top[0]->count() * inputs * g.kernel[0] * g.kernel[1];
  p->one_thread = SmallWork(flops, sizeof(float) * (static_cast<double>(input.count()) + top[0]->count() +
                                                    static_cast<double>(params_[0]->count())));
  {
    OneThreadWhile threads(p->one_thread);
    const bool set_to_int8 = !backward && layer_param().has_quantization();
    if (set_to_int8) {  // a bad setting is named on any CPU
      CREMA_CHECK(!transposed_) << Layer::describe() << ": quantization is for Convolution layers";
      QuantizationOf(layer_param().quantization(), Layer::describe());
    }
    if (set_to_int8 && onednn::Int8Allowed(*this)) {
      // 8-bit integers, where oneDNN has kernels for them on this CPU; else float, said once.
      const QuantizationParameter& q = layer_param().quantization();
      // A bottom the plan keeps in 8 bits is read as it lies; a float one is quantized into the workspace. A top kept
      // in 8 bits is written so, in its planned layout.
      p->int8_src =
          input.quantization().integers()
              ? p->user_src
              : memory::desc(p->user_src.dims(), q.input_unsigned() ? memory::data_type::u8 : memory::data_type::s8,
                             layout == "nhwc" ? Tag::nhwc : Tag::any);
      p->int8_weights_any = memory::desc(p->user_weights.dims(), memory::data_type::s8, Tag::any);
      p->int8_dst = top[0]->quantization().integers()
                        ? p->user_dst
                        : memory::desc(p->user_dst.dims(), f32, layout == "nhwc" ? Tag::nhwc : Tag::any);
      p->top_scale = top[0]->quantization().integers() ? top[0]->quantization().scale : 1.f;
      if (fused_sum() && summand_ != nullptr) {
        // An 8-bit output only over a summand in 8 bits, held so or quantized into the output's memory as its readers
        // quantize it (plan_element_types): the sum reads it in its own type, its range measured.
        p->summand_quantization = summand_->quantization();
        const bool held = summand_->quantization().integers();
        const Quantization a = held ? summand_->quantization() : float_summand_quantization();
        if (top[0]->quantization().integers()) {
          CREMA_CHECK(a.integers()) << Layer::describe() << ": its output was planned in "
                                    << ElementTypeName(top[0]->data_type()) << " over a float summand";
          p->sum_scale = p->top_scale / a.scale;
          p->sum_type = onednn::DataTypeOf(a.type);
          if (!held) p->summand_scale = a.scale;  // quantized there
        } else if (held) {
          p->summand_scale = 1.f / a.scale;  // dequantized into the float output
        }
      }
      p->strides = strides;
      p->dilates = dilates;
      p->pad_left = pad_left;
      p->pad_right = pad_right;
      try {
        MakeInt8Forward(p.get());
        p->int8 = true;
        if (!input.quantization().integers())
          p->quantize_src = onednn::QuantizingReorder(p->user_src, p->forward.src_desc(0), q.input_scale());
      } catch (const dnnl::error& error) {
        onednn::WarnInt8Refused(Layer::describe(), error.what());
        p->int8 = false;
      }
    }
    CREMA_CHECK(p->int8 || (!input.quantization().integers() && !top[0]->quantization().integers() &&
                            !(summand_ != nullptr && summand_->quantization().integers())))
        << Layer::describe() << ": its blobs were planned in 8 bits, but it computes in float here";
    if (!p->int8) {
      // In bfloat16 where this CPU has the kernels (onednn::EnginePrecision) and oneDNN takes these shapes, else
      // float32, said once.
      // Where a pass's kernel would err (KernelFault), the layer takes channel blocks instead, and where even those
      // would, computes in float32.
      const auto hazard = [&] {
        std::string why = KernelFault(p->forward, PassKind::kForward, p->forward.src_desc(0), group_, strides);
        if (why.empty() && backward && (transposed_ || inputs >= kFewChannels))  // else crema's GEMM steps (below)
          why = KernelFault(p->backward_data, PassKind::kInputGradient, p->backward_data.diff_dst_desc(0), group_,
                            strides);
        if (why.empty() && backward && !transposed_)
          why = KernelFault(p->backward_weights, PassKind::kWeightGradient, p->backward_weights.src_desc(0), group_,
                            strides);
        return why;
      };
      const auto describe_in = [&](Precision precision) {
        describe(layout == "nhwc" ? Tag::nhwc : Tag::any, precision);
        const bool padded = PaddedElements(p->forward.src_desc(0)) > PaddedElements(p->user_src) ||
                            PaddedElements(p->forward.dst_desc(0)) > PaddedElements(p->user_dst);
        if (layout.empty() && padded) describe(Tag::nhwc, precision);
        if (hazard().empty()) return;
        describe(Tag::any, precision);
        const std::string why = hazard();
        if (!why.empty()) throw dnnl::error(dnnl_unimplemented, why.c_str());
      };
      p->precision = onednn::EnginePrecision(*this);
      try {
        describe_in(p->precision);
      } catch (const dnnl::error& error) {
        if (p->precision == Precision::kFloat32) throw;
        onednn::WarnHalfRefused(Layer::describe(), p->precision, error.what());
        p->precision = Precision::kFloat32;
        describe_in(p->precision);
      }
      CREMA_CHECK(p->precision == Precision::kBfloat16 ||
                  (input.quantization().floats() && top[0]->quantization().floats()))
          << Layer::describe() << ": its blobs were planned in bfloat16, but it computes in float32 here";
      p->forward_primitive = dnnl::primitive(p->forward.get());
    }
  }
  p->offered = onednn::LayoutOf(p->forward.dst_desc(0), top[0]->shape());
  p->with_backward = backward;
  // crema's bf16 Winograd, where the blobs lie in 16-channel blocks (the plan's, from the second Reshape on) and it
  // takes the shape (CREMA_BF16_WINOGRAD=0 keeps oneDNN's direct kernels, for comparisons).
  const char* bf16_winograd = std::getenv("CREMA_BF16_WINOGRAD");
  const FusedActivation& activation = fused_activation_;
  if (!p->int8 && p->precision == Precision::kBfloat16 && three_by_three && layer_param().bottom_size() == 1 &&
      !fused_sum() && (activation.kind == FusedActivation::kNone || activation.kind == FusedActivation::kReLU) &&
      input.layout() == Layout::kChannelBlocks16 && top[0]->layout() == Layout::kChannelBlocks16 &&
      (bf16_winograd == nullptr || std::string(bf16_winograd) != "0")) {
    WinogradShape shape;
    shape.num = num_;
    shape.inputs = c;
    shape.outputs = num_output_;
    shape.height = h;
    shape.width = w;
    shape.pad_h = g.pad[0];
    shape.pad_w = g.pad[1];
    shape.out_h = oh;
    shape.out_w = ow;
    if (Bfloat16Winograd::Refusal(shape).empty()) {
      // The weights' transforms carry over a reshape to the same shape and passes.
      p->winograd_backward = backward;
      p->winograd = std::make_unique<Bfloat16Winograd>(shape, backward, OpenMpThreadCount());
    }
  }
  // A reshape keeps the weights' copies where the layouts they want stay the same.
  if (primitives_) {
    p->weights = std::move(primitives_->weights);
    p->data_weights_cache = std::move(primitives_->data_weights_cache);
  }
  if (!p->int8) p->weights.Describe(p->forward.weights_desc(0), p->user_weights);
  // In bf16 training the weights change every iteration: a 1x1 convolution's bf16 copy in the primitive's layout, an
  // inner product's layout, is registered with the blob where crema writes that layout (WeightCache::DeriveFrom), so
  // that the solver's update writes it as it writes the weights, where each forward reordered them. So is the copy
  // its input gradient reads (below).
  const bool derives_weights = !p->int8 && !p->winograd && backward && p->precision == Precision::kBfloat16 &&
                               group_ == 1 && !transposed_ && g.kernel[0] == 1 && g.kernel[1] == 1;
  if (derives_weights) p->weights.DeriveFrom(params_[0].get());
  p->forward_src = p->forward.src_desc(0);
  p->forward_dst = p->forward.dst_desc(0);
  p->summand_target =
      p->sum_type == memory::data_type::undef ? p->forward_dst : onednn::WithDataType(p->forward_dst, p->sum_type);
  p->forward_scratch_desc = p->forward.scratchpad_desc();
  p->src = p->regions.AddCopy(p->forward_src, p->user_src);
  p->dst = p->regions.AddCopy(p->forward_dst, p->user_dst);
  p->forward_scratch = p->regions.Add(p->forward_scratch_desc);
  const auto floats = [](size_t count) { return memory::desc(Dims({static_cast<int>(count)}), f32, Tag::x); };
  if (p->winograd) p->winograd_forward = p->regions.Add(floats(p->winograd->WorkspaceFloats()));
  if (!backward) {
    RequestWorkspace(p->regions.Floats());
    primitives_ = std::move(p);
    return;
  }
  p->backward_weights_primitive = dnnl::primitive(p->backward_weights.get());
  // The input gradient of a convolution over a few channels (an RGB or grey image: CaffeNet's and CIFAR-10's
  // conv1) comes out of oneDNN padded to a whole channel block, 16 channels computed for 3, in either layout;
  // Caffe's GEMM and col2im steps ran CaffeNet's conv1 input gradient 2-3x faster (docs/performance.md). (A
  // deconvolution's input gradient is a convolution forward, which has no such padding to undo.)
  p->gemm_backward_data = !transposed_ && inputs < kFewChannels;
  if (!p->gemm_backward_data) p->backward_data_primitive = dnnl::primitive(p->backward_data.get());
  p->data_reads_cached = !p->gemm_backward_data && p->backward_data.weights_desc(0) == p->forward.weights_desc(0);
  if (derives_weights && !p->gemm_backward_data && !p->data_reads_cached) {
    p->data_weights_cache.Describe(p->backward_data.weights_desc(0), p->user_weights);
    p->data_weights_derived = p->data_weights_cache.DeriveFrom(params_[0].get());
  }
  if (!p->data_weights_derived) p->data_weights_cache = onednn::WeightCache();  // none kept, none registered

  // The forward pass (its regions above), the weight gradient and the input gradient run one after another and each
  // uses the workspace afresh, so their regions overlap: the workspace is the largest phase, not their sum.
  // Both backward passes read the output gradient; where they read it alike and not as it lies (in bf16, or in another
  // layout), one conversion serves both: it comes first and stays through the input gradient's phase.
  p->reads_bf16_diff_dst = p->backward_weights.diff_dst_desc(0).data_type() == memory::data_type::bf16 &&
                           p->backward_data.diff_dst_desc(0).data_type() == memory::data_type::bf16;
  CREMA_CHECK(top[0]->diff_type() == ElementType::kFloat32 || p->reads_bf16_diff_dst)
      << Layer::describe() << ": its output gradient is planned in bf16, which its backward primitives do not read";
  p->regions.Restart();
  p->shared_diff_dst = !p->gemm_backward_data &&
                       p->backward_data.diff_dst_desc(0) == p->backward_weights.diff_dst_desc(0) &&
                       p->backward_weights.diff_dst_desc(0) != p->user_diff_dst;
  p->backward_diff_dst = p->regions.AddCopy(p->backward_weights.diff_dst_desc(0), p->user_diff_dst);
  const size_t kept = p->shared_diff_dst ? p->regions.Mark() : 0;
  p->backward_src = p->regions.AddCopy(p->backward_weights.src_desc(0), p->user_src);
  p->computed_diff_weights = p->regions.AddCopy(p->backward_weights.diff_weights_desc(0), p->user_weights);
  p->diff_weights = p->regions.Add(p->user_weights);
  p->diff_bias = p->regions.Add(p->user_bias);
  p->weights_scratch = p->regions.Add(p->backward_weights.scratchpad_desc());
  if (p->winograd_backward && p->winograd->has_weight_gradient())
    p->winograd_weights = p->regions.Add(floats(p->winograd->WorkspaceFloats()));
  p->regions.Restart(kept);
  if (!p->gemm_backward_data) {
    if (!p->data_reads_cached && !p->data_weights_derived)
      p->data_weights = p->regions.AddCopy(p->backward_data.weights_desc(0), p->user_weights);
    p->data_diff_dst = p->shared_diff_dst ? p->backward_diff_dst
                                          : p->regions.AddCopy(p->backward_data.diff_dst_desc(0), p->user_diff_dst);
    p->diff_src = p->regions.AddCopy(p->backward_data.diff_src_desc(0), p->user_diff_src);
    p->data_scratch = p->regions.Add(p->backward_data.scratchpad_desc());
    if (p->winograd_backward) p->winograd_data = p->regions.Add(floats(p->winograd->WorkspaceFloats()));
  }
  size_t gemm_floats = 0;
  if (p->gemm_backward_data) {
    // The GEMM steps read the output gradient plain (from a top in a run's layout, a plain copy) and make the column
    // gradient in bands, one per thread where the images are split over the threads (InputGradientByBands).
    onednn::Regions gemm;
    p->band_rows = std::max<int>(
        1, std::min<int>(
               oh, static_cast<int>(kBandFloats / (static_cast<size_t>(column_rows()) * static_cast<size_t>(ow)))));
    p->band_threads = std::max(1, std::min(OpenMpThreadCount(), num_));
    const size_t band_floats = static_cast<size_t>(column_rows()) * p->band_rows * ow;
    p->bands = gemm.Add(memory::desc(Dims({static_cast<int>(band_floats * p->band_threads)}), f32, Tag::x));
    p->gemm_bf16 = p->precision == Precision::kBfloat16;
    if (p->gemm_bf16) {
      // Each group's product: the column gradient [kernel_dim x positions] (floats, the band's rows one after another)
      // = W^T [kernel_dim x outputs] (the bf16 weights, read transposed) x dY [outputs x positions] (the plain
      // gradient's rows, an output's spatial plane apart). Made for the threads a product runs on.
      p->plain_bf16_diff_dst = onednn::WithDataType(onednn::PlainDesc(top[0]->shape()), memory::data_type::bf16);
      p->plain_diff_dst = gemm.Add(p->plain_bf16_diff_dst);
      const memory::dim m = kernel_dim_, k = num_output_ / group_, plane = static_cast<memory::dim>(oh) * ow;
      const auto make = [&](int rows, dnnl::matmul::primitive_desc* desc, dnnl::matmul* matmul) {
        const memory::dim n = static_cast<memory::dim>(rows) * ow;
        OneThreadWhile one(p->band_threads > 1);
        *desc = dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(memory::desc({m, k}, memory::data_type::bf16, memory::dims{1, m}),
                               memory::desc({k, n}, memory::data_type::bf16, memory::dims{plane, 1}),
                               memory::desc({m, n}, f32, memory::dims{n, 1})),
            onednn::UserScratchpad(), CpuEngine());
        *matmul = dnnl::matmul(*desc);
      };
      make(p->band_rows, &p->band_matmul_desc, &p->band_matmul);
      const int last_rows = oh - (oh - 1) / p->band_rows * p->band_rows;
      make(last_rows, &p->last_band_matmul_desc, &p->last_band_matmul);
      // Each thread's scratchpad, whole cache lines apart.
      p->band_scratch_bytes = (std::max(p->band_matmul_desc.scratchpad_desc().get_size(),
                                        p->last_band_matmul_desc.scratchpad_desc().get_size()) +
                               63) /
                              64 * 64;
      p->band_scratch = gemm.Add(memory::desc(
          Dims({static_cast<int>(p->band_scratch_bytes / sizeof(float) * p->band_threads + 16)}), f32, Tag::x));
    } else if (top[0]->layout() != Layout::kPlain) {
      p->plain_diff_dst = gemm.Add(onednn::PlainDesc(top[0]->shape()));
    }
    gemm_floats = gemm.Floats();
  }
  RequestWorkspace(std::max(p->regions.Floats(), gemm_floats));
  primitives_ = std::move(p);
}

bool OneDnnConvolutionLayer::ThreadCountChangesPass(bool backward) const {
  // crema's bf16 Winograd computes each output on one thread (the same bits on any count); oneDNN's splits its sums.
  return backward || (!(primitives_ && primitives_->winograd) && implementation().find("wino") != std::string::npos);
}

bool OneDnnConvolutionLayer::runs_int8() const { return primitives_ && primitives_->int8; }

Quantization OneDnnConvolutionLayer::ReadsQuantized(int bottom) const {
  if (ReadsAnyQuantization(bottom)) return sum_quantization();  // an offer
  if (runs_bf16_blobs() && bottom == 0) return {ElementType::kBfloat16, 1.f};
  return onednn::Int8Reads(*this, runs_int8(), bottom);
}

bool OneDnnConvolutionLayer::WritesQuantized(int top, ElementType type) const {
  if (type == ElementType::kBfloat16) return runs_bf16_blobs() && top == 0;
  return onednn::Int8Writes(*this, runs_int8(), top);
}

bool OneDnnConvolutionLayer::ReadsTopDiffInBfloat16(int top, const std::vector<bool>& propagate_down) const {
  // A fused ReLU of slope 0 zeroes the gradient where the output is not positive (ApplyFusedActivationBackward), which
  // commutes with the rounding; other activations' products do not. The GEMM steps of an input gradient computing in
  // float32 read floats.
  const FusedActivation& activation = fused_activation();
  const bool gemm = primitives_ && primitives_->gemm_backward_data && !primitives_->gemm_bf16 &&
                    !propagate_down.empty() && propagate_down[0];
  return top == 0 && runs_bf16_blobs() && primitives_->with_backward && primitives_->reads_bf16_diff_dst && !gemm &&
         (activation.kind == FusedActivation::kNone ||
          (activation.kind == FusedActivation::kReLU && activation.alpha == 0.f));
}

bool OneDnnConvolutionLayer::WritesBottomDiffInBfloat16(int bottom) const {
  // oneDNN's bf16 input gradient rounds its float sums to nearest even, as a reader's conversion would.
  return bottom == 0 && runs_bf16_blobs() && !transposed_ && primitives_->with_backward &&
         !primitives_->gemm_backward_data;
}

bool OneDnnConvolutionLayer::runs_bf16_blobs() const {
  return primitives_ && !primitives_->int8 && primitives_->precision == Precision::kBfloat16 &&
         layer_param().bottom_size() == 1;
}

bool OneDnnConvolutionLayer::ReadsAnyQuantization(int bottom) const {
  return runs_int8() && fused_sum() && bottom == layer_param().bottom_size();  // the summand, last
}

Precision OneDnnConvolutionLayer::computes_in() const {
  return primitives_ ? primitives_->precision : Precision::kFloat32;
}

std::string OneDnnConvolutionLayer::engine_note() const {
  if (runs_int8()) return "8-bit integers";
  if (primitives_ && primitives_->winograd) return std::string(PrecisionName(computes_in())) + " Winograd";
  if (computes_in() != Precision::kFloat32) return PrecisionName(computes_in());
  return implementation().find("wino") != std::string::npos ? "Winograd" : "";
}

std::string OneDnnConvolutionLayer::implementation() const {
  if (primitives_ && primitives_->winograd)
    return primitives_->winograd_backward && !primitives_->winograd->has_weight_gradient()
               ? "crema_bf16_winograd_2x3 (the weights' gradient oneDNN's)"
               : "crema_bf16_winograd_2x3";
  return primitives_ ? primitives_->forward.impl_info_str() : "";
}

bool OneDnnConvolutionLayer::ReadsLayout(int bottom, Layout layout) const {
  if (fused_sum() && bottom == 1) return true;  // the summand, reordered into the output's layout where it differs
  // Any layout, reordered to the primitives' where it differs; but the GEMM steps write a plain input gradient.
  return layout == Layout::kPlain || (layer_param().bottom_size() == 1 && !primitives_->gemm_backward_data);
}

Layout OneDnnConvolutionLayer::OffersLayout(int top, const std::vector<Layout>&) const {
  return layer_param().bottom_size() == 1 ? primitives_->offered : Layout::kPlain;
}

using onednn::Binder;

void OneDnnConvolutionLayer::MakeInt8Forward(Primitives* p) const {
  const Blob* bias = bias_term_ ? params_[1].get() : nullptr;
  // Each output channel's weights lie together (oihw, and goihw by group).
  p->int8_weights.Quantize(*params_[0], bias, num_output_, params_[0]->count() / num_output_, 1,
                           layer_param().quantization().input_scale(), describe());
  dnnl::primitive_attr attr = onednn::UserScratchpadWith(fused_activation_, fused_sum(), p->sum_scale, p->sum_type);
  attr.set_output_scales(1 << 1, p->int8_weights.OutputScales(p->top_scale));
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      p->int8_src, p->int8_weights_any, bias ? p->user_bias : memory::desc(),
                                      p->int8_dst, p->strides, p->dilates, p->pad_left, p->pad_right),
      attr, CpuEngine());
  if (p->int8) onednn::CheckRemadeKeepsLayouts(p->forward, pd, describe());
  p->forward = pd;
  p->forward_primitive = dnnl::primitive(pd);
  p->int8_weights.Place(
      memory::desc(p->user_weights.dims(), memory::data_type::s8, group_ == 1 ? Tag::oihw : Tag::goihw),
      pd.weights_desc());
}

void OneDnnConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Primitives& p = *primitives_;
  OneThreadWhile threads(p.one_thread);
  if (p.int8 && p.int8_weights.Stale(*params_[0], bias_term_ ? params_[1].get() : nullptr)) MakeInt8Forward(&p);
  Binder bind(workspace(), &p.forward_bindings);
  if (p.winograd) {
    const FusedActivation& activation = fused_activation_;
    p.winograd->Forward(*params_[0], bias_term_ ? params_[1]->cpu_data() : nullptr,
                        activation.kind == FusedActivation::kReLU, activation.alpha, bottom[0]->cpu_bytes(),
                        bottom[0]->data_type() == ElementType::kBfloat16, top[0]->mutable_cpu_bytes(),
                        top[0]->data_type() == ElementType::kBfloat16, bind.At(p.winograd_forward));
    return;
  }
  const memory weights = p.int8 ? p.int8_weights.placed() : p.weights.Get(*params_[0], bind.stream());
  for (size_t b = 0; b < bottom.size(); ++b) {
    memory src;
    if (p.int8 && bottom[b]->quantization().integers()) {  // 8 bits already
      src = bind.In(p.user_src, bottom[b]->cpu_bytes(), p.forward_src, p.src);
    } else if (p.int8) {  // quantized into the workspace
      const memory user = bind.Plain(p.user_src, bottom[b]->cpu_data());
      src = bind.Scratch(p.forward_src, p.src);
      onednn::RunReorder(p.quantize_src, bind.stream(), user, src);
    } else {  // floats, or bf16 where planned so
      src = bind.In(p.user_src, bottom[b]->cpu_bytes(), p.forward_src, p.src);
    }
    void* output = top[b]->mutable_cpu_bytes();  // floats, or 8 bits where planned so
    const memory dst = bind.Result(p.user_dst, output, p.forward_dst, p.dst);
    // A fused sum: the primitive adds what its output buffer holds, so the summand goes there first, in its layout
    // and element type (Primitives::sum_scale).
    if (summand_ != nullptr) {
      CREMA_CHECK(summand_->quantization() == p.summand_quantization)
          << describe() << ": the summand of its fused sum holds " << ElementTypeName(summand_->data_type())
          << ", not what its primitive was made for";
      const memory::desc summand_desc = onednn::BlobDesc(*summand_);
      const memory summand = bind.Plain(summand_desc, summand_->cpu_bytes());
      const bool shared = summand.get_data_handle() == dst.get_data_handle();
      if (summand_desc != p.summand_target) {
        CREMA_CHECK(!shared) << describe() << ": the summand of its fused sum shares the output's memory but lies in "
                             << "another layout or type";
        const memory target(p.summand_target, CpuEngine(), dst.get_data_handle());
        if (p.summand_scale == 1.f) {
          onednn::RunReorder(onednn::Reorder(summand_desc, p.summand_target), bind.stream(), summand, target);
        } else {
          if (p.summand_from != summand_desc) {
            p.summand_reorder = onednn::QuantizingReorder(summand_desc, p.summand_target, p.summand_scale);
            p.summand_from = summand_desc;
          }
          onednn::RunReorder(p.summand_reorder, bind.stream(), summand, target);
        }
      } else if (!shared) {
        std::memcpy(dst.get_data_handle(), summand.get_data_handle(), p.summand_target.get_size());
      }
    }
    onednn::Args args = {{DNNL_ARG_SRC, src},
                         {DNNL_ARG_WEIGHTS, weights},
                         {DNNL_ARG_DST, dst},
                         {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.forward_scratch_desc, p.forward_scratch)}};
    if (bias_term_)
      args[DNNL_ARG_BIAS] =
          bind.Plain(p.user_bias, p.int8 ? p.int8_weights.scaled_bias().data() : params_[1]->cpu_data());
    args.Run(p.forward_primitive, bind.stream());
    bind.Out(dst, p.user_dst, output);
  }
  bind.stream().wait();
}

void OneDnnConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                          const std::vector<Blob*>& bottom) {
  Primitives& p = *primitives_;
  CREMA_CHECK(p.with_backward) << describe() << ": its primitives were made for forward passes only (no backward "
                               << "planned); plan the backward pass before running it";
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = bias_term_ && param_propagate_down(1);
  Binder bind(workspace(), &p.backward_bindings);
  for (size_t b = 0; b < top.size(); ++b) {
    // floats, or bf16 where planned so (then as the primitives read it: no conversion)
    const void* top_diff = top[b]->cpu_diff_bytes();
    // The output gradient as the weight gradient read it, where the input gradient shares it (shared_diff_dst).
    memory converted_diff_dst;
    if (weight_grad && p.winograd_backward && p.winograd->has_weight_gradient()) {
      p.winograd->WeightGradient(bottom[b]->cpu_bytes(), bottom[b]->data_type() == ElementType::kBfloat16, top_diff,
                                 top[b]->diff_type() == ElementType::kBfloat16, params_[0]->mutable_cpu_diff(),
                                 bias_grad ? params_[1]->mutable_cpu_diff() : nullptr, bind.At(p.winograd_weights));
    } else if (weight_grad || bias_grad) {
      const memory diff_dst =
          bind.In(p.user_diff_dst, top_diff, p.backward_weights.diff_dst_desc(0), p.backward_diff_dst);
      if (p.shared_diff_dst) converted_diff_dst = diff_dst;
      // floats, or bf16 where planned so (then as the primitive reads them: no conversion)
      const memory src = bind.In(p.user_src, bottom[b]->cpu_bytes(), p.backward_weights.src_desc(0), p.backward_src);
      const memory diff_weights = bind.Result(p.user_weights, bind.At(p.diff_weights),
                                              p.backward_weights.diff_weights_desc(0), p.computed_diff_weights);
      onednn::Args args = {
          {DNNL_ARG_SRC, src},
          {DNNL_ARG_DIFF_DST, diff_dst},
          {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
          {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward_weights.scratchpad_desc(), p.weights_scratch)}};
      if (bias_term_) args[DNNL_ARG_DIFF_BIAS] = bind.Plain(p.user_bias, bind.At(p.diff_bias));
      args.Run(p.backward_weights_primitive, bind.stream());
      // Gradients accumulate (over bottoms and calls): the net zeroes them before a backward. From the primitive's
      // blocked layout, added to the parameter's plain diff in one pass where AddToPlain reads it.
      bool added = false;
      if (weight_grad && diff_weights.get_data_handle() != bind.At(p.diff_weights)) {
        bind.stream().wait();
        added = onednn::AddToPlain(diff_weights.get_desc(), static_cast<const float*>(diff_weights.get_data_handle()),
                                   p.user_weights, params_[0]->mutable_cpu_diff());
      }
      if (!added) bind.Out(diff_weights, p.user_weights, bind.At(p.diff_weights));
      bind.stream().wait();
      if (weight_grad && !added)
        cpu_axpy(params_[0]->count(), 1.f, bind.At(p.diff_weights), params_[0]->mutable_cpu_diff());
      if (bias_grad) cpu_axpy(params_[1]->count(), 1.f, bind.At(p.diff_bias), params_[1]->mutable_cpu_diff());
    }
    if (propagate_down[b] && p.gemm_bf16) {
      // The output gradient plain in bf16 (rounded, where it lies in floats), the weights rounded where they changed.
      const memory plain = bind.In(p.user_diff_dst, top_diff, p.plain_bf16_diff_dst, p.plain_diff_dst);
      bind.stream().wait();
      const float* w = params_[0]->cpu_data();
      if (p.bf16_weights_version != params_[0]->data_version() || p.bf16_weights_source != w) {
        p.bf16_weights.resize(params_[0]->count());
        for (int i = 0; i < params_[0]->count(); ++i) p.bf16_weights[i] = ToBfloat16(w[i]);
        p.bf16_weights_version = params_[0]->data_version();
        p.bf16_weights_source = w;
      }
      InputGradientByBands(plain.get_data_handle(), p.bf16_weights.data(), bind.At(p.bands), bind.At(p.band_scratch),
                           bottom[b]->mutable_cpu_diff());
    } else if (propagate_down[b] && p.gemm_backward_data) {
      CREMA_CHECK(top[b]->diff_type() == ElementType::kFloat32)
          << describe() << ": its GEMM steps read the output gradient in floats, not as planned";
      if (top[b]->layout() != Layout::kPlain) {
        const memory plain = bind.In(p.user_diff_dst, top_diff, onednn::PlainDesc(top[b]->shape()), p.plain_diff_dst);
        bind.stream().wait();
        top_diff = plain.get_data_handle();
      }
      InputGradientByBands(top_diff, params_[0]->cpu_data(), bind.At(p.bands), nullptr, bottom[b]->mutable_cpu_diff());
    } else if (propagate_down[b] && p.winograd_backward) {
      p.winograd->InputGradient(*params_[0], top_diff, top[b]->diff_type() == ElementType::kBfloat16,
                                bottom[b]->mutable_cpu_diff_bytes(), bottom[b]->diff_type() == ElementType::kBfloat16,
                                bind.At(p.winograd_data));
    } else if (propagate_down[b]) {
      const memory weights = p.data_reads_cached      ? p.weights.Get(*params_[0], bind.stream())
                             : p.data_weights_derived ? p.data_weights_cache.Get(*params_[0], bind.stream())
                                                      : bind.In(p.user_weights, params_[0]->cpu_data(),
                                                                p.backward_data.weights_desc(0), p.data_weights);
      const memory diff_dst =
          converted_diff_dst ? converted_diff_dst
                             : bind.In(p.user_diff_dst, top_diff, p.backward_data.diff_dst_desc(0), p.data_diff_dst);
      // floats, or bf16 where planned so (then as the primitive writes them)
      void* input_diff = bottom[b]->mutable_cpu_diff_bytes();
      const memory diff_src = bind.Result(p.user_diff_src, input_diff, p.backward_data.diff_src_desc(0), p.diff_src);
      onednn::Args({{DNNL_ARG_DIFF_DST, diff_dst},
                    {DNNL_ARG_WEIGHTS, weights},
                    {DNNL_ARG_DIFF_SRC, diff_src},
                    {DNNL_ARG_SCRATCHPAD, bind.Scratch(p.backward_data.scratchpad_desc(), p.data_scratch)}})
          .Run(p.backward_data_primitive, bind.stream());
      bind.Out(diff_src, p.user_diff_src, input_diff);
      bind.stream().wait();
    }
  }
}

void OneDnnConvolutionLayer::InputGradientByBands(const void* top_diff, const void* weights, float* bands,
                                                  float* band_scratch, float* input_diff) const {
  const Primitives& p = *primitives_;
  const size_t element = p.gemm_bf16 ? sizeof(uint16_t) : sizeof(float);
  const auto* top_bytes = static_cast<const char*>(top_diff);
  const auto* weight_bytes = static_cast<const char*>(weights);
  const KernelGeometry& g = geometry_;
  const int height = conv_input_shape_[1], width = conv_input_shape_[2];
  const int out_h = conv_output_spatial_[0], out_w = conv_output_spatial_[1];
  const int rows = column_rows(), group_outputs = conv_out_channels_ / group_;
  const size_t band_floats = static_cast<size_t>(rows) * p.band_rows * out_w;
  // One image: zeroed, then for each band of output rows the column gradient W^T dY of those rows (a product per
  // group) added into the image where each column's kernel offset puts it (col2im, a band at a time). Within an
  // image the sums run in one order whatever the threads, which take whole images.
  // In bf16, the matmuls' memories, one set per thread (made once, pointed at each product's operands).
  struct Operands {
    dnnl::stream stream{CpuEngine()};
    memory full_a, full_b, full_c, full_scratch, last_a, last_b, last_c, last_scratch;
  };
  const auto image = [&](int n, float* band, Operands* operands) {
    const char* image_top_diff = top_bytes + static_cast<size_t>(n) * top_dim_ * element;
    float* image_diff = input_diff + static_cast<size_t>(n) * bottom_dim_;
    std::memset(image_diff, 0, sizeof(float) * bottom_dim_);
    for (int first = 0; first < out_h; first += p.band_rows) {
      const int band_h = std::min(p.band_rows, out_h - first);
      const int positions = band_h * out_w;
      for (int gr = 0; gr < group_; ++gr) {
        const void* group_weights = weight_bytes + static_cast<size_t>(gr) * group_outputs * kernel_dim_ * element;
        const void* group_top_diff =
            image_top_diff +
            (static_cast<size_t>(gr) * group_outputs * conv_output_spatial_size_ + static_cast<size_t>(first) * out_w) *
                element;
        float* columns = band + static_cast<size_t>(gr) * kernel_dim_ * positions;
        if (operands != nullptr) {
          const bool last = band_h != p.band_rows;
          const dnnl::matmul& matmul = last ? p.last_band_matmul : p.band_matmul;
          memory& a = last ? operands->last_a : operands->full_a;
          memory& b = last ? operands->last_b : operands->full_b;
          memory& c = last ? operands->last_c : operands->full_c;
          a.set_data_handle(const_cast<void*>(group_weights));
          b.set_data_handle(const_cast<void*>(group_top_diff));
          c.set_data_handle(columns);
          matmul.execute(operands->stream,
                         {{DNNL_ARG_SRC, a},
                          {DNNL_ARG_WEIGHTS, b},
                          {DNNL_ARG_DST, c},
                          {DNNL_ARG_SCRATCHPAD, last ? operands->last_scratch : operands->full_scratch}});
          operands->stream.wait();
          continue;
        }
        const dnnl_status_t status = dnnl_sgemm(
            'T', 'N', kernel_dim_, positions, group_outputs, 1.f, static_cast<const float*>(group_weights), kernel_dim_,
            static_cast<const float*>(group_top_diff), conv_output_spatial_size_, 0.f, columns, positions);
        CREMA_CHECK(status == dnnl_success) << describe() << ": oneDNN's sgemm failed (status " << status << ")";
      }
      col2im_band_cpu(band, conv_input_shape_[0], height, width, g.kernel[0], g.kernel[1], g.pad[0], g.pad[1],
                      g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], first, band_h, image_diff);
    }
  };
  // The images over the threads (each product then on its own thread), or one after another with each product on
  // all of them where there are fewer images than threads or the threads are a lane's.
  // Thread `thread`'s: its scratchpad the workspace's stretch for it.
  const auto operands_for = [&](Operands* o, int thread) -> Operands* {
    if (!p.gemm_bf16) return nullptr;
    char* scratch = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(band_scratch) + 63) / 64 * 64) +
                    p.band_scratch_bytes * thread;
    const auto bound = [&](const dnnl::matmul::primitive_desc& d, memory* a, memory* b, memory* c, memory* s) {
      *a = memory(d.src_desc(), CpuEngine(), nullptr);
      *b = memory(d.weights_desc(), CpuEngine(), nullptr);
      *c = memory(d.dst_desc(), CpuEngine(), nullptr);
      *s = memory(d.scratchpad_desc(), CpuEngine(), scratch);
    };
    bound(p.band_matmul_desc, &o->full_a, &o->full_b, &o->full_c, &o->full_scratch);
    bound(p.last_band_matmul_desc, &o->last_a, &o->last_b, &o->last_c, &o->last_scratch);
    return o;
  };
#ifdef _OPENMP
  const int threads = std::min(p.band_threads, CurrentThreadCount());
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      Operands mine;
      Operands* operands = operands_for(&mine, omp_get_thread_num());
#pragma omp for schedule(static, 1)
      for (int n = 0; n < num_; ++n)
        image(n, bands + static_cast<size_t>(omp_get_thread_num()) * band_floats, operands);
    }
    return;
  }
#endif
  Operands mine;
  Operands* operands = operands_for(&mine, 0);
  for (int n = 0; n < num_; ++n) image(n, bands, operands);
}

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
