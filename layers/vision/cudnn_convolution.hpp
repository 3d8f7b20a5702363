// Convolution and Deconvolution, engine `cudnn` (GPU only, in builds with cuDNN): cuDNN's convolution forward,
// backward-data and backward-filter through the adapter (core/cudnn.hpp), with the bias added by cudnnAddTensor
// and its gradient from cudnnConvolutionBackwardBias. Parameters, fillers, output shape and the layer's checks are
// BaseConvolutionLayer's (layers/vision/base_convolution.hpp), so the weights and results are the native engines'.
//
// The three algorithms are chosen in Reshape from cuDNN's heuristics (cached per shape for the process), within
// the context's workspace limit and, in deterministic mode, among the deterministic ones; the layer requests the
// largest of their workspaces from the net's shared workspace (Layer::RequestWorkspace), which serves it in
// Forward and Backward. Deconvolution is the same convolution run the other way: its forward is the
// convolution's backward-data from its bottom to its top, its input gradient the convolution's forward.
//
// Gradients: the weight and bias gradients accumulate into the diffs (the net zeroes them before a backward
// pass), the bottom gradient is overwritten, as in every engine.
//
// Takes (Refusal): 2-d and 3-d convolutions over channel axis 1 (N x C x H x W or N x C x D x H x W bottoms);
// everything BaseConvolutionLayer accepts there (pads, strides, dilations, groups, several bottoms).
//
// In a rewritten inference plan (net/fold.hpp) the forward adds a fused sum itself and computes a fused ReLU with the
// bias in one cuDNN call; other fused activations follow as Layer::Forward's separate pass.
//
// Precision: on a GPU whose tensor cores multiply in it (core/half_products.hpp), a layer asked to compute in float16
// or bfloat16 runs cuDNN's convolutions over 16-bit tensors with float32 sums: its input, weights and output gradient
// rounded into the workspace (the weights' copy kept while they are unchanged), each 16-bit result widened into its
// float32 blob (the output, plus a fused sum; the input gradient; the weights' gradient added to theirs). The bias,
// its gradient and a fused ReLU run in float32 on the widened output, as separate calls.
//
// On a CPU context (never the registry's choice) the layer still sets up: describing the convolution to cuDNN
// needs no device, and checks cuDNN's output shape against Caffe's; it chooses no algorithms and does not run.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <memory>
#include <string>
#include <vector>

#include "core/cudnn.hpp"
#include "core/half_products.hpp"
#include "layers/layer_registry.hpp"
#include "layers/vision/base_convolution.hpp"

namespace crema {

// Both layers: `transposed` makes it the Deconvolution.
class CudnnConvolutionLayer : public GpuOnly<BaseConvolutionLayer> {
 public:
  explicit CudnnConvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr,
                                 bool transposed = false);
  const char* type() const override { return transposed_ ? "Deconvolution" : "Convolution"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);
  // The plan of the current shapes (its chosen algorithms), for tests and logs.
  const cudnn::ConvolutionPlan& plan() const { return plan_; }
  // Its fused sum adds to what the output holds (beta 1, or cuDNN's z aliasing y): the output may lie in the
  // summand's memory.
  bool SumsIntoSummandMemory() const override { return ComputesFusedSum(); }

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  bool reverse_dimensions() const override { return transposed_; }
  // Inference rewrites: a fused sum is added by the convolution itself (beta 1 over the output that holds the
  // summand), and a fused ReLU (slope 0) with the bias in the same call, cudnnConvolutionBiasActivationForward.
  bool ComputesFusedSum() const override { return !transposed_ && fused_sum(); }
  bool ComputesFusedActivation() const override { return FusesBiasAndReLU(fused_activation_) || half_tops_; }
  // In training too: in that call, or in half precision as the base's engines (HalfTop).
  bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const override {
    return FusesBiasAndReLU(activation) || HalfTopApplies(activation);
  }

 private:
  // Whether the forward with `activation` fused is one cudnnConvolutionBiasActivationForward: a 2-d convolution in
  // float32 with a bias and a ReLU without slope (cuDNN's fused call takes no other activation but identity, and that
  // with one algorithm).
  bool FusesBiasAndReLU(const FusedActivation& activation) const;
  // The workspace for a call of `direction` (nullptr where its algorithm needs none).
  void* WorkspaceFor(cudnn::Direction direction);
  // In half precision, the workspace after the algorithms' part holds the 16-bit bottom (one bottom's values), top
  // and weights' gradient, each from a 256-byte boundary.
  uint16_t* HalfRegion(int which);
  void HalfForward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void HalfBackward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom);

  const bool transposed_;
  bool empty_ = false;  // a bottom or top with no values: nothing to compute
  cudnn::ConvolutionPlan plan_;
  // The bias (1, num_output, 1, 1) and the top it is added to, seen as (N, num_output, spatial positions, 1): the
  // same packed memory, in the 4-d form every cuDNN version's bias calls take.
  cudnn::TensorDescriptor bias_, biased_top_;
  cudnn::ActivationDescriptor relu_;  // for FusesBiasAndReLU
  std::vector<size_t> half_offsets_;  // bytes into the workspace of the three 16-bit regions (half_ set)
};

class CudnnDeconvolutionLayer : public CudnnConvolutionLayer {
 public:
  explicit CudnnDeconvolutionLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr)
      : CudnnConvolutionLayer(param, std::move(context), true) {}
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
