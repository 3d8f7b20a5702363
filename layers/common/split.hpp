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
  // The bf16 rule, in a net computing in bf16 (Layer::requested_precision) on the CPU where oneDNN computes bf16: it
  // reads copy t's gradient rounded to bf16 (as it lies in bf16, or rounded from floats) where `rounded[t]`, so that
  // gradient may lie in bf16. The net's plan_element_types pass says which, in every run: a copy whose reader's
  // backward could write its gradient in bf16 (Layer::WritesBottomDiffInBfloat16: a convolution, a residual sum).
  void RoundCopyGradients(const std::vector<bool>& rounded);
  bool ReadsTopDiffInBfloat16(int top, const std::vector<bool>& propagate_down) const override;
  Layout OffersLayout(int, const std::vector<Layout>& bottom_layouts) const override { return bottom_layouts[0]; }

 protected:
  void Forward_any(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_any(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Backward by the bf16 rule or into a bf16 gradient, on the CPU: the copies' gradients, each in floats or bf16, added
  // in floats in top order, the sum stored in the bottom gradient's type.
  void SumByTheBfloat16Rule(const std::vector<Blob*>& top, Blob* bottom) const;
  std::vector<bool> rounded_;  // RoundCopyGradients'
};

}  // namespace crema
