// InnerProduct, engine `onednn` (in builds with oneDNN): in a net that runs forward only (Layer::backward_planned
// false: testing, inference), oneDNN's inner-product primitive with the weights reordered once into the layout it
// chose and kept while they are unchanged (onednn::WeightCache), and a fused activation as its post-op. A fully
// connected layer over few items is bound by reading its weights: CaffeNet's fc6 at batch 16 reads 151 MB to do 1.2
// GFLOP, and a matrix product handed the plain weights repacks them on every call. Where backward may run (training),
// and for weights under 1 MiB (which the caches hold), the engine is the native one: the matrix products on the plain
// weights, so training is unchanged. With a `quantization` setting (written by `crema quantize`), a net that runs
// forward only computes it in 8-bit integers whatever the size of its weights (onednn::Int8Weights). Parameters and
// shapes: layers/common/inner_product.hpp.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/common/inner_product.hpp"
#include "layers/layer_registry.hpp"

namespace crema {
namespace onednn {
class Regions;
}  // namespace onednn

class OneDnnInnerProductLayer : public InnerProductLayer {
 public:
  explicit OneDnnInnerProductLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnInnerProductLayer() override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The weights reordered into the primitive's layout, once it has run.
  std::vector<HeldBuffer> HeldBuffers() const override;
  // Whether its forward runs in 8-bit integers (QuantizationParameter, in a net that runs forward only, where oneDNN
  // has the kernels; any size of weights).
  bool runs_int8() const;
  // bfloat16 where asked for (Layer::requested_precision) and this CPU has oneDNN's kernels, in training too (then
  // oneDNN's primitives compute the gradients; under 32 rows the weights' gradient is float32's product, and over
  // the bf16 weights the solver's update writes, the input gradient is crema's own product), else float32; over large
  // weights at under 32 rows in training, float32 where crema cannot write their bf16 copy.
  Precision computes_in() const override;
  // "8-bit integers" or "bfloat16" where it runs in them (with what of it does not: the weights' gradient in float32
  // at few rows, and whether the solver's update writes its bf16 weights), else "".
  std::string engine_note() const override;
  // As the convolution's engine (onednn::Int8Reads, Int8Writes), its bottom plain.
  Quantization ReadsQuantized(int bottom) const override;
  bool WritesQuantized(int top, ElementType type) const override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  bool ComputesFusedActivation() const override;

 private:
  // The oneDNN objects (dnnl.hpp stays out of this header); null where the native products run (a float32 layer
  // that may run backward, or with small weights).
  struct Primitive;
  void MakeInt8Forward(Primitive* p) const;
  void MakeHalfPrecision(Primitive* p, onednn::Regions* regions) const;
  std::unique_ptr<Primitive> primitive_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
