// Pooling, engine `cudnn` (GPU only, in builds with cuDNN): MAX and AVE pooling through cuDNN's pooling forward
// and backward (core/cudnn.hpp). Parameters, checks and output shape are PoolingLayer's (layers/vision/pooling.hpp).
// cuDNN's backward recomputes each window's maximum from the bottom and the top, so no argmax is kept.
//
// Takes (Refusal) only the cases where cuDNN computes what the native engine does:
//   - MAX and AVE, not STOCHASTIC (its samples come from the layer's own random stream);
//   - one top: cuDNN keeps no argmax to give as MAX's second (mask) top;
//   - output sizes that cuDNN's rule gives too: cuDNN rounds (in + 2 * pad - kernel) / stride down, Caffe's
//     default round_mode CEIL rounds up (adding a last window that overhangs the input); they agree under FLOOR and
//     wherever the division is exact (global pooling, 2x2 stride 2 on even sizes, 3x3 stride 1 pad 1);
//   - a window no larger than the padded input.
// Under those sizes every window lies inside the padded input and covers at least one input value (pad < kernel),
// so AVE's divisor is the whole kernel area, padding included, in both engines (CUDNN_POOLING_AVERAGE_COUNT_
// INCLUDE_PADDING), and MAX takes the maximum over the window's input values (cuDNN leaves the padding out of
// the maximum, as the native engine does; the GPU test pins it with negative values at the borders).
//
// Differences that no refusal can see, as they depend on the values: where a MAX window holds equal maxima, the
// native engine sends the gradient to the first of them and cuDNN to one of its own choosing (the GPU test checks
// that it is one maximum per window); a NaN in a MAX window makes cuDNN's output NaN (CUDNN_PROPAGATE_NAN), while the
// native engine keeps NaN only where it is the window's first value. In deterministic mode MAX's backward is cuDNN's
// deterministic one.
//
// Where its blobs lie in 16 bits (a MAX pooling between the GPU's half-precision layers, which passes the values
// through: PoolingLayer::PassesQuantizationThrough), the layer runs the native engine's rules instead: forward over the
// 16-bit values, keeping the argmax (internal, `<layer>.argmax`, empty over floats), backward by it; so no cuDNN call
// ever sees a 16-bit tensor of pooling, in forward or backward. So does an AVE pooling that reads its input in 16 bits
// in GPU code computing in float16 or bf16 (PoolingLayer::ReadsQuantized), over a 16-bit blob or over floats, which
// its rule rounds to 16 bits first.
#pragma once

#ifdef CREMA_USE_CUDNN

#include <memory>
#include <string>
#include <vector>

#include "core/cudnn.hpp"
#include "layers/layer_registry.hpp"
#include "layers/vision/pooling.hpp"

namespace crema {

class CudnnPoolingLayer : public GpuOnly<PoolingLayer> {
 public:
  using GpuOnly<PoolingLayer>::GpuOnly;
  // No mask top (see above).
  int MaxTopBlobs() const override { return 1; }
  // cuDNN's backward is given the input and the output (it finds the maxima again).
  bool BackwardReadsBottom(int) const override { return true; }
  bool BackwardReadsTop(int) const override { return true; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  // A fused ReLU: in the native rules over 16-bit blobs; over floats the layer applies it after cuDNN's pooling.
  bool ComputesFusedActivation() const override { return by_rules_ && PoolingLayer::ComputesFusedActivation(); }

 private:
  bool empty_ = false;     // no values to pool
  bool by_rules_ = false;  // 16-bit blobs: the native rules run
  cudnn::TensorDescriptor bottom_desc_, top_desc_;
  cudnn::PoolingDescriptor pooling_;
};

}  // namespace crema

#endif  // CREMA_USE_CUDNN
