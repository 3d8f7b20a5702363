// Pooling, engine `onednn` (in builds with oneDNN): oneDNN's pooling primitives forward and backward, with
// the native engine's parameters and output shapes (layers/vision/pooling.hpp). oneDNN keeps its own record of each
// window's maximum (an internal blob, kept from Forward to Backward) instead of the native argmax. MAX pooling of a
// bottom in a run's channel blocks or channels-last, its top in the same layout, runs crema's own vector loops
// instead (layers/vision/pooling_lanes.hpp: several times oneDNN's speed there, and the native engine's results bit
// for bit); CREMA_ONEDNN_POOLING=1 keeps oneDNN's primitives for them, for comparisons.
//
// Takes MAX and AVE pooling of 4-d bottoms with one top (no argmax top) whose windows each cover some of the
// input, and AVE only where oneDNN's divisor is Caffe's: the kernel's area when every window ends inside the
// padded input, or the count of input pixels when there is no padding. The rest falls to the native engine.
// Where a window holds equal maxima, the gradient may go to another of them than the native engine's (the
// first); both are gradients of the same output.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/vision/pooling.hpp"

namespace crema {

namespace onednn {
class Passes;  // layers/onednn_util.hpp (dnnl.hpp stays out of this header)
}

class OneDnnPoolingLayer : public PoolingLayer {
 public:
  explicit OneDnnPoolingLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnPoolingLayer() override;
  int MaxTopBlobs() const override { return 1; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Pools in whatever layout its bottom comes in (oneDNN's kernels take them all), and offers it to the top.
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }
  // MAX picks values: the largest of 8-bit values is the 8-bit value of the largest, so it pooling in 8 bits gives what
  // quantizing its float output would (running forward only, on oneDNN's primitive; an average would round anew); the
  // same in bf16, in training too where its own loops run (channels side by side). In training the maxima it records
  // are the bf16 values': where rounding made two equal, the first wins, and its backward may send a gradient to
  // another of them than the float run would (a gradient of the bf16 run's maximum, not the float run's bits).
  bool PassesQuantizationThrough() const override;
  // MAX pooling in its own loops, in a net computing in bf16 (Layer::requested_precision) on a CPU with bf16 kernels:
  // its gradient by the bf16 rule, which reads the output gradient rounded to bf16 and rounds each input's sum (it may
  // then lie in bf16 on both sides).
  bool computes_bf16_gradients() const { return bf16_gradients_; }
  bool ReadsTopDiffInBfloat16(int, const std::vector<bool>&) const override { return bf16_gradients_; }
  bool WritesBottomDiffInBfloat16(int) const override { return bf16_gradients_; }

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  std::unique_ptr<onednn::Passes> passes_;  // the primitives for the current shapes
  Blob* maxima_ = nullptr;                  // MAX: oneDNN's workspace, where each window's maximum was
  bool in_lanes_ = false;                   // MAX over channels side by side: crema's loops (pooling_lanes.hpp)
  bool lanes_possible_ = false;             // the loops could take it (MAX, channels side by side, small windows)
  bool bf16_gradients_ = false;             // its backward by the bf16 rule (computes_bf16_gradients)
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
