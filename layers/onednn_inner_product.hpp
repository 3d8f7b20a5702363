// InnerProduct, engine `onednn` (in builds with oneDNN): the forward (bias included) and the input gradient by
// oneDNN's inner product primitives, the weights' and bias's gradients by the native engine's BLAS calls,
// which accumulate as a layer's parameter gradients must (shared weights, iter_size) where oneDNN's overwrite.
// Measured side by side at the benchmark nets' shapes (benchmarks/inner_product_primitives.cpp,
// docs/performance.md): oneDNN's forward and input gradient beat OpenBLAS's sgemm 1.2-2x at CaffeNet's fc6 and
// fc7 and more at the thin ones, and OpenBLAS's accumulating weight gradient beats oneDNN's plus the sum.
// Parameters, shapes and blobs as the native engine (layers/inner_product.hpp), `transpose` included.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/inner_product.hpp"
#include "layers/layer_registry.hpp"

namespace crema {

class OneDnnInnerProductLayer : public InnerProductLayer {
 public:
  explicit OneDnnInnerProductLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnInnerProductLayer() override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  struct Primitives;  // layers/onednn_inner_product.cpp (dnnl.hpp stays out of this header)
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
