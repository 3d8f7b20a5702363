// Split: hands one bottom to several consumers. Every top is a view of the bottom's data (declared in
// TopViews) with a diff of its own; backward sums the tops' gradients into the bottom's. Nets insert it where
// one blob feeds several layers, so that each consumer writes its gradient to a diff of its own.
#pragma once

#include <vector>

#include "layers/layer.hpp"

namespace crema {

class SplitLayer : public BothDevices<Layer> {
 public:
  using BothDevices<Layer>::BothDevices;
  const char* type() const override { return "Split"; }
  // Backward reads no data (it sums the copies' gradients).
  bool BackwardReadsBottom(int) const override { return false; }
  bool BackwardReadsTop(int) const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  std::vector<TopView> TopViews(int num_tops) const override;
  // Forward only hands the bottom out (the tops view it).
  bool ForwardIsIdentity() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The tops see the bottom's memory, so they share its layout, whatever it is (backward sums gradients value
  // by value); the plan_layouts pass asks the tops' readers too.
  bool ReadsLayout(int, Layout) const override { return true; }
  // On the CPU it writes the bottom's gradient (the sum of the copies' gradients, in floats) rounded to bf16 where the
  // bottom's writer reads it so (a residual sum computing in bf16).
  bool WritesBottomDiffInBfloat16(int) const override { return !RunsGpuCode(); }
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Backward into a bf16 gradient, on the CPU.
  void SumInBfloat16(const std::vector<Blob*>& top, Blob* bottom) const;
};

}  // namespace crema
