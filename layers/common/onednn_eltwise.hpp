// Eltwise, engine `onednn` (in builds with oneDNN): SUM of 4-d bottoms with oneDNN's sum primitive, which takes
// each bottom in its own layout, scales it by its coefficient and writes the top in its own. So a residual sum
// reads the channel-blocked output of a run of oneDNN layers (a ResNet block's last BatchNorm and Scale) as it
// is, and the run goes on through it. Backward writes each bottom's gradient, the top's times the bottom's
// coefficient, with one reorder, into the bottom's layout. Parameters as the native engine (layers/common/eltwise.hpp);
// PROD and MAX, and bottoms that are not 4-d, fall to it.
#pragma once

#ifdef CREMA_USE_ONEDNN

#include <memory>
#include <string>
#include <vector>

#include "layers/common/eltwise.hpp"
#include "layers/layer_registry.hpp"

namespace crema {

class OneDnnEltwiseLayer : public EltwiseLayer {
 public:
  explicit OneDnnEltwiseLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~OneDnnEltwiseLayer() override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Takes each bottom in any layout; offers the bottoms' layout when they share one, else the first one that is
  // not plain (a sum of a run's output and a plain shortcut goes on in the run's layout).
  bool ReadsLayout(int, Layout) const override { return true; }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override;

  // "" when the engine takes the query, else why not (the registry's refusal).
  static std::string Refusal(const EngineQuery& query);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  struct Primitives;  // layers/common/onednn_eltwise.cpp (dnnl.hpp stays out of this header)
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace crema

#endif  // CREMA_USE_ONEDNN
