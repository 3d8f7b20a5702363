// Concat, engine `onednn` (in builds with oneDNN): joins 4-d bottoms along the channel axis with oneDNN's concat
// primitive, which takes each bottom in its own layout and writes the top in its own. So it reads the
// channel-blocked outputs of a run of oneDNN convolutions (GoogLeNet's inception branches) as they are, and
// the run goes on through it. Where the bottoms and the top share a layout whose images are contiguous (plain or
// channel blocks), the join is one copy per bottom and image instead (and backward the copies back). Backward copies
// each bottom's part of the top's gradient out, reordered to the bottom's layout where the two differ. Parameters and
// shapes as the native engine (layers/common/concat.hpp); any other axis, or bottoms that are not 4-d, fall to it.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/common/concat.hpp"
#include "layers/layer_registry.hpp"

namespace crema {

class OneDnnConcatLayer : public ConcatLayer {
 public:
  explicit OneDnnConcatLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnConcatLayer() override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Any layout for each bottom; the top in the bottoms' layout where they all share one, else in the channel blocks
  // of one of them where every bottom's channels fill whole blocks, else plain.
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override;
  // Its top holds its bottoms' values as they are: in 8 bits or bf16 as well (the join copies bytes, or oneDNN's joins
  // any type), in training too (its backward splits the float gradient; 8 bits are planned forward only).
  bool PassesQuantizationThrough() const override { return true; }
  // Its backward can hand a bottom its part of the gradient in bf16 (rounded as ToBfloat16 rounds), for a convolution
  // reading it so (an inception branch's).
  bool WritesBottomDiffInBfloat16(int) const override { return primitives_ != nullptr; }

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  struct Primitives;  // the oneDNN objects (dnnl.hpp stays out of this header)
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
