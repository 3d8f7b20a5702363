// LRN, engine `onednn` (in builds with oneDNN): oneDNN's LRN primitives forward and backward, with the native engine's
// parameters (layers/normalization/lrn.hpp): ACROSS_CHANNELS with k, and WITHIN_CHANNEL with 1 in k's place, as Caffe
// computes it. oneDNN keeps what its backward needs in its own workspace (the internal blob `<layer>.workspace`)
// instead of the native engine's scale. It reads crema's NCHW blobs directly; a shape or window oneDNN has no primitive
// for is refused and falls to the native engine.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/normalization/lrn.hpp"

namespace crema {

namespace onednn {
class Passes;  // layers/onednn_util.hpp (dnnl.hpp stays out of this header)
}

class OneDnnLRNLayer : public LRNLayer {
 public:
  explicit OneDnnLRNLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnLRNLayer() override;
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Takes its bottom in any layout (and works in it when oneDNN's kernels for it are not the reference ones),
  // and offers that layout to the top.
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }

  // It writes its top in 8 bits (forward only in channels-last: its own loops) or bf16 (its own loops round; oneDNN's
  // primitive writes floats, reordered into the top; in training too, whose backward reads its input, not its top)
  // where every reader converts it alike (plan_element_types): the values those readers would have made of its floats.
  bool WritesQuantized(int, ElementType type) const override {
    return own_channels_last_ || type == ElementType::kBfloat16;
  }

  // The bf16 rule, in a layout of oneDNN's (a channel-blocked run) where the layer is asked to compute in bf16
  // (Layer::requested_precision) and oneDNN computes bf16 on this CPU: oneDNN's bf16 primitives, which read the input
  // and, in backward, the output's gradient rounded to bf16 (so both may lie in bf16), compute in float32 and write
  // the output and the input's gradient rounded to bf16 (each may then lie in bf16).
  bool computes_bf16() const { return bf16_; }
  Quantization ReadsQuantized(int) const override {
    return bf16_ ? Quantization{ElementType::kBfloat16, 1.f} : Quantization{};
  }
  bool ReadsTopDiffInBfloat16(int, const std::vector<bool>&) const override { return bf16_; }
  bool WritesBottomDiffInBfloat16(int) const override { return bf16_; }

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  std::unique_ptr<onednn::Passes> passes_;  // the primitives for the current shapes
  Blob* saved_ = nullptr;                   // oneDNN's workspace, kept from Forward to Backward
  bool own_channels_last_ = false;          // forward only, channels-last: LRNAcrossChannelsLast
  bool bf16_ = false;                       // computes by the bf16 rule (computes_bf16)
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
