// BatchNorm, engine `onednn` (in builds with oneDNN): oneDNN's batch normalization primitives (no scale or shift:
// Caffe's BatchNorm has none, a Scale layer follows it) forward and backward, with the native engine's parameters,
// statistics blobs and running sums (layers/normalization/batch_norm.hpp). It reads its 4-d bottom in any layout, so a
// run of oneDNN layers goes on through it (a ResNet's convolution, BatchNorm, Scale and ReLU stay in the convolution's
// channel blocks). oneDNN's kernels for the other layouts are jit ones; for the plain layout it has only a generic one,
// slower than the native loops (docs/performance.md), so a plain bottom goes through the native engine's loops and
// buffers instead. In the other layouts, the batch's mean and variance are internal blobs (`<layer>.mean`,
// `<layer>.variance`) kept for backward. Out of place, oneDNN's backward primitive reads them and the input. In place,
// where the top overwrites the input, forward runs in place and keeps the normalized values it wrote
// (`<layer>.normalized`, the top's layout) and 1 / sqrt(var + eps) (`<layer>.inv_std`), and backward runs the native
// engine's rule over them in that layout (BatchNormLayer::BackwardLoops): the one copy a Scale in place after it reads
// too (Layer::KeptTop), where a copy of the input would need a second. Bottoms that are not 4-d fall to the native
// engine. With a Scale (and ReLU) fused (BatchNormLayer::AbsorbAffine), the forward primitive writes the normalized
// values it keeps, out of place, the fused loops write the top from them (in floats or bf16), and backward runs the
// fused loops; in a net computing in bf16, the bf16 rule without oneDNN's primitive (computes_bf16).
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/layer_registry.hpp"
#include "layers/normalization/batch_norm.hpp"

namespace crema {

class OneDnnBatchNormLayer : public BatchNormLayer {
 public:
  // A CPU engine: its fused Scale and ReLU are the CPU's loops.
  bool AbsorbsAffineInGpuCode() const override { return false; }
  explicit OneDnnBatchNormLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnBatchNormLayer() override;
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }
  // oneDNN's backward takes the input; the fused loops read the normalized values kept.
  bool BackwardReadsBottom(int) const override { return !absorbs_affine(); }
  // oneDNN splits its sums over the threads: the gradients (not the fused Scale's loops'), and in training the
  // batch's statistics.
  bool ThreadCountChangesPass(bool backward) const override {
    return backward ? !absorbs_affine() : !use_global_stats_ && !bf16_;
  }
  // In place it reads the normalized values it kept, in any layout.
  bool BackwardReadsInPlace(int) const override { return false; }
  // Its normalized values: on a plain bottom (the native loops), or in place; none once it runs a Scale after it.
  const Blob* KeptTop(int) const override {
    return !absorbs_affine() && (primitives_ == nullptr || in_place_) ? normalized_ : nullptr;
  }

  // With a Scale fused, in a layout of oneDNN's (its primitive, then the fused loops, which round where the top is
  // bf16), it writes its top in bf16 (the values the readers would have rounded its floats to: a ResNet's
  // convolution computing in bf16, training too, whose backward reads only the normalized values kept), out of place:
  // in place on its input (the convolution's output, in floats), it may leave its place for a top of its own.
  bool WritesQuantized(int, ElementType type) const override {
    return type == ElementType::kBfloat16 && absorbs_affine() && primitives_ != nullptr;
  }
  bool MayLeavePlace(int) const override { return absorbs_affine(); }
  // Its fused loops write the input's gradient in bf16 too (out of place), for a convolution reading it so.
  bool WritesBottomDiffInBfloat16(int) const override { return absorbs_affine() && primitives_ != nullptr; }

  // The bf16 rule (BatchNormLayer::Bfloat16Forward), with a Scale fused, in a layout of oneDNN's, where the layer is
  // asked to compute in bf16 (Layer::requested_precision) and oneDNN computes bf16 on this CPU (the convolutions around
  // it do): it reads its input rounded to bf16 (the convolution's output: it may lie in bf16), takes the batch's
  // statistics from those values in its own loops (in one order whatever the threads), keeps the normalized values in
  // bf16, and reads the output's gradient rounded to bf16 (the next convolution's input gradient: it may lie in bf16).
  // Elsewhere the rule in floats, oneDNN's statistics.
  bool computes_bf16() const { return bf16_; }
  Precision computes_in() const override { return bf16_ ? Precision::kBfloat16 : Precision::kFloat32; }
  Quantization ReadsQuantized(int) const override {
    return bf16_ ? Quantization{ElementType::kBfloat16, 1.f} : Quantization{};
  }
  bool ReadsTopDiffInBfloat16(int, const std::vector<bool>&) const override { return bf16_; }

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  struct Primitives;  // layers/normalization/onednn_batch_norm.cpp (dnnl.hpp stays out of this header)
  std::unique_ptr<Primitives> primitives_;
  bool in_place_ = false;
  bool bf16_ = false;     // computes by the bf16 rule (computes_bf16)
  Blob* mean_ = nullptr;  // the statistics the forward used, per channel
  Blob* variance_ = nullptr;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
