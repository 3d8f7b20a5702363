// Convolution and Deconvolution, engine `onednn` (in builds with oneDNN, Debian's libdnnl-dev): oneDNN's
// (de)convolution primitives forward, backward-data and backward-weights, which choose their own blocked
// memory layouts and kernels for the CPU they run on (AVX2 or AVX-512, found at run time). The engine reorders
// the weights, and the input, output and gradients where their blobs' layouts are not the primitives' (plain
// blobs; see below for runs), into the layouts the primitives chose and the results back, in the net's
// workspace (so the plan sees every buffer, oneDNN's scratchpad included). The forward pass's weights are
// reordered into the layer's own memory instead and kept while the weights are unchanged (a test pass or
// inference reorders them once; onednn::WeightCache). Parameter gradients are computed into the workspace and
// added to the blobs' diffs, which accumulate as with every engine.
//
// Layouts: oneDNN's channel-blocked one, or channels-last where blocks would pad the channels. The input
// gradient of a convolution over fewer than 8 channels per group (an image's) takes BaseConvolutionLayer's GEMM
// and col2im steps instead, since oneDNN computes it for a whole padded block.
//
// Takes 2-d (de)convolutions over channel axis 1 on the CPU. A convolution's output size must be one oneDNN's
// arithmetic reproduces (a stride that leaves more than its own width of input unused is refused; the
// `im2col_batched` engine then serves); a deconvolution's always is. Parameters and shapes:
// layers/vision/base_convolution.hpp, layers/vision/deconvolution.hpp (whose weights, input channels first, oneDNN
// reads as they are).
//
// Between this layer and the next oneDNN (or elementwise) layers, the net keeps the blobs in the primitives'
// layout (core/layout.hpp, the plan_layouts pass): the reorders happen only at the edges of such a run.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/vision/base_convolution.hpp"

namespace crema {

// Both layers: `transposed` makes it the Deconvolution.
class OneDnnConvolutionLayer : public BaseConvolutionLayer {
 public:
  explicit OneDnnConvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr,
                                  bool transposed = false);
  ~OneDnnConvolutionLayer() override;
  const char* type() const override { return transposed_ ? "Deconvolution" : "Convolution"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Offers its top in the layout its forward primitive writes (channel blocks or channels-last), and reads a
  // bottom in any layout (reordered where it is not the primitives').
  bool ReadsLayout(int bottom, Layout layout) const override;
  Layout OffersLayout(int top, const std::vector<Layout>& bottom_layouts) const override;
  // The weights reordered into the forward primitive's layout, once it has run (none where that is crema's own).
  std::vector<HeldBuffer> HeldBuffers() const override;
  // Its fused sum is a post-op adding to the output: the output may lie in the summand's memory.
  bool SumsIntoSummandMemory() const override { return fused_sum(); }

  // Backward: the weights' gradient sums over the batch and the positions, split over the threads. Forward:
  // Winograd's kernels split their sums too (on one thread they gave other bits than on two, where the direct
  // kernels, which split their outputs, give the same).
  bool ThreadCountChangesPass(bool backward) const override;

  // oneDNN's name for the forward kernel it chose (Winograd's: "jit_fp32_wino_2x3:avx512_core", say), for tests and
  // diagnostics; "" before the first Reshape. crema's bf16 Winograd: "crema_bf16_winograd_2x3", which names oneDNN's
  // weight gradient where that stays oneDNN's.
  std::string implementation() const;

  // Whether its forward runs in 8-bit integers (QuantizationParameter, in a net that runs forward only, where oneDNN
  // has the kernels).
  bool runs_int8() const;
  // Whether it computes in bfloat16 over one bottom: it then reads and writes bf16 data where the plan keeps it so
  // (plan_element_types), in training too.
  bool runs_bf16_blobs() const;
  // Running in 8 bits, it reads and writes 8-bit blobs where onednn::Int8Reads / Int8Writes say (one bottom; the top
  // with its output scales times the top's scale); computing in bfloat16 (runs_bf16_blobs), bf16 blobs: the values its
  // products would have read (in forward and in the weights' gradient), and its output rounded as its readers would
  // have rounded it (a fused ReLU's backward reads its sign); the gradients stay float32.
  Quantization ReadsQuantized(int bottom) const override;
  bool WritesQuantized(int top, ElementType type) const override;
  // Computing in bfloat16 (runs_bf16_blobs), its backward passes read the output gradient rounded to bf16 (without a
  // fused activation but a ReLU of slope 0, whose backward rewrites the gradient first; the GEMM steps of an input
  // gradient too, in bf16): it may lie in bf16. And its input gradient's primitive can write the input gradient in bf16
  // (a convolution's; not where GEMM steps compute it).
  bool ReadsTopDiffInBfloat16(int top, const std::vector<bool>& propagate_down) const override;
  bool WritesBottomDiffInBfloat16(int bottom) const override;
  // The summand of a fused sum, running in 8 bits: in any type and scale (Primitives::sum_scale), offering the sum's
  // own quantization (Layer::sum_quantization).
  bool ReadsAnyQuantization(int bottom) const override;
  // bfloat16 where asked for (Layer::requested_precision) and this CPU has oneDNN's kernels, else float32.
  Precision computes_in() const override;
  // "8-bit integers", "bfloat16" or "Winograd" (its forward's kernels), else "".
  std::string engine_note() const override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  bool reverse_dimensions() const override { return transposed_; }
  // A fused activation is a post-op of the forward primitive, in training too.
  bool ComputesFusedActivation() const override { return fused_activation_.kind != FusedActivation::kNone; }
  bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const override {
    return TakesFusedActivation(activation);
  }
  // And a fused sum as a sum post-op before it, which adds what the output holds: the summand, copied there unless
  // the memory plan put the output in the summand's memory.
  bool ComputesFusedSum() const override { return fused_sum(); }

 private:
  // The input gradient by BaseConvolutionLayer's product and fold, a band of output rows at a time in `bands` (the
  // workspace's stretches for them), the images split over the threads: from the plain output gradient `top_diff` and
  // the weights, floats, or both bf16 where the layer computes in bf16 (oneDNN's bf16 matmul, float32 sums).
  // (`band_scratch`: the bf16 matmuls' scratchpads, one per thread.)
  void InputGradientByBands(const void* top_diff, const void* weights, float* bands, float* band_scratch,
                            float* input_diff) const;

  struct Primitives;  // the oneDNN objects (dnnl.hpp stays out of this header)
  // The 8-bit forward for the weights and bias as they are now (onednn::Int8Weights): the primitive made with their
  // output scales, and the quantized weights placed in its layout (Primitives says why it is made again).
  void MakeInt8Forward(Primitives* p) const;

  const bool transposed_;
  std::unique_ptr<Primitives> primitives_;
};

class OneDnnDeconvolutionLayer : public OneDnnConvolutionLayer {
 public:
  explicit OneDnnDeconvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr)
      : OneDnnConvolutionLayer(param, std::move(context), true) {}
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
