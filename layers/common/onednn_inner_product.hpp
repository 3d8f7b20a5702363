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
  // "8-bit integers" where it runs in them, else "".
  std::string engine_note() const override { return runs_int8() ? "8-bit integers" : ""; }
  // As the convolution's engine (onednn::Int8Reads, Int8Writes), its bottom plain.
  Quantization ReadsQuantized(int bottom) const override;
  bool WritesQuantized(int top) const override;

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  bool ComputesFusedActivation() const override;

 private:
  struct Primitive;  // the oneDNN objects (dnnl.hpp stays out of this header); null where backward may run
  void MakeInt8Forward(Primitive* p) const;
  std::unique_ptr<Primitive> primitive_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
