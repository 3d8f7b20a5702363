// InnerProduct (fully connected): top = bottom * weights^T + bias, where the bottom is viewed as an M x K
// matrix: its axes from `axis` on are flattened into K, the axes before it form M.
//
// inner_product_param:
//   num_output (N, required), bias_term, weight_filler, bias_filler
//   axis         first axis flattened into K (default 1); negative counts from the end
//   transpose    store the weights as K x N instead of N x K
// Top shape: bottom shape[0:axis] + [N]. Parameters: weights (N x K, or K x N), bias (N).
//
// Precision: on a GPU that has the tensor cores for it (core/half_products.hpp), a layer asked to compute in float16
// or bfloat16 multiplies its input, weights and output gradient rounded to that type, with float32 sums written into
// its float32 output and gradients (cuBLAS's GemmEx); the bias and its gradient stay float32. Elsewhere, float32.
#pragma once

#include <string>
#include <vector>

#include "core/half_products.hpp"
#include "layers/layer.hpp"

namespace crema {

class InnerProductLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "InnerProduct"; }
  // Backward reads the input (the weights' gradient), not the output; but a ReLU fused for training reads the
  // output's sign (Layer::set_fused_activation_with_backward).
  bool BackwardReadsTop(int) const override { return activation_with_backward(); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  double ForwardFlops() const override;
  double BackwardFlops(const std::vector<bool>& propagate_down) const override;
  // Inference rewrites (net/fold.hpp): with the output on axis 1 (items x outputs), a per-output scale and shift
  // folds into the weights and the bias (the rewrite gives a layer without one a bias); a fused activation runs over
  // the output after the product.
  bool AbsorbsChannelAffine() const override { return axis_ == 1; }
  void AbsorbChannelAffine(const std::vector<float>& scale, const std::vector<float>& shift) override;
  bool TakesFusedActivation(const FusedActivation&) const override { return true; }
  // In training too, in GPU code computing in half precision (HalfTop).
  bool AppliesActivationInItsOwnPass(const FusedActivation& activation) const override {
    return HalfTopApplies(activation);
  }
  bool TakesFusedSum() const override { return true; }
  // Its backward writes the weights' and the bias's gradients where the net leaves their zeroing to it.
  bool WritesZeroedParamGradients() const override { return true; }
  // Float16 or bfloat16 on a GPU that multiplies in it (and in the host rehearsal of GPU code), as asked; else float32.
  Precision computes_in() const override { return half_; }
  std::string engine_note() const override;
  // In half precision the products' operands are 16-bit values: a bottom the plan keeps in that type is read as it
  // lies, and the top may be written so (its bias and a fused ReLU applied first: Layer::HalfTopFinishOf).
  Quantization ReadsQuantized(int bottom) const override { return HalfOperands(half_, bottom); }
  bool WritesQuantized(int, ElementType type) const override { return WritesHalfTop(half_, type); }

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // Backward's two halves in float32: the weights' and the bias's gradients (added to their diffs, where they
  // propagate), and the input's.
  void ParameterGradients(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom);
  void InputGradient(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom);
  // The bias's gradient (float32 in every precision), added or written as ParameterGradients says.
  void BiasGradient(const std::vector<Blob*>& top);

  // Items (M), inputs per item (K) and outputs (N) of the product, as of the last Reshape.
  int M_ = 0, K_ = 0, N_ = 0;
  int axis_ = 1;  // the flattening axis, as of the last Reshape
  bool bias_term_ = true;
  bool transpose_ = false;

 private:
  // The GPU code's half-precision passes (half_ set): the same products with 16-bit factors.
  void HalfForward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void HalfBackward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom);
  // The workspace as the 16-bit input (M x K), the 16-bit output gradient (M x N) and, for a 16-bit top, the float32
  // output (M x N) it is rounded from.
  uint16_t* HalfInput();
  uint16_t* HalfOutputGradient();
  size_t HalfOutputGradientOffset() const;  // in 16-bit values
  float* FloatOutput();
  size_t FloatOutputOffset() const;  // in floats
  // A 16-bit top (planned so): the layer applies a fused ReLU itself, as it writes the 16 bits.
  bool ComputesFusedActivation() const override { return half_top_; }

  Precision half_ = Precision::kFloat32;  // the precision its products compute in (Reshape)
  HalfCopy half_weights_;                 // the weights rounded to half_, while they are unchanged
  bool half_top_ = false;                 // whether the top lies in 16 bits (Reshape)

  // The canonical `axis` for this bottom; throws naming the layer when it is out of range.
  int FlattenAxis(const Blob& bottom) const;
};

}  // namespace crema
