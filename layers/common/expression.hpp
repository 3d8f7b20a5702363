// Expression: tops computed from formulas over the bottoms, written in the prototxt (src/core/formula.hpp for what a
// formula may say):
//   layer { name: 'swish' type: 'Expression' bottom: 'x' top: 'y' expression_param { formula: 'x * sigmoid(x)' } }
// One formula per top, over the bottoms by blob name (`conv1/out` in backquotes where a name is not an identifier),
// or by the names bottom_name gives them (one per bottom: bottom: 'conv1/out' bottom_name: 'x').
//
// Axes. The largest bottom's axes have names (expression_param.axes; by default "n c h w" for four axes, "n c" for
// two, and so on), and every other bottom varies over some of them: one of the same shape over all, one that holds
// one value over none, one of shape (C) or (1, C, 1, 1) beside an (N, C, H, W) over c; bottom_axes says which where
// the shape leaves a doubt. A bottom is broadcast along the axes it does not vary over. Reductions name the axes
// they take away: mean[h, w](x) is (N, C), sum((y - t)^2) a scalar (shape (), as Caffe's losses: with a loss_weight
// it is a loss). A top has the shape of the axes its formula varies over.
//
// When the layer is set up each formula is parsed (an error names the layer, the formula and the column), the
// bottoms' axes found (an error names the bottom and its shape), and the gradient of every top with respect to every
// bottom derived symbolically (FormulaGraph::Differentiate; a broadcast bottom gets the sum of its gradient along
// the axes it is broadcast over). The forward formulas are one program and each set of gradients backward computes
// another: a pass over memory per reduction and one for the rest, in chunks, on all the threads. The costly values
// forward computes and a gradient needs (FormulaCostly: sigmoid(x) in x * sigmoid(x), a reduction) are kept from
// forward, in a top where a top is that value, else in an internal blob ("<layer>.kept<k>"); backward reads them and
// computes the rest again, and declares to the memory plan only the bottoms and tops it reads.
//
// Params (expression_param): formula (repeated, one per top), bottom_name (none or one per bottom), axes,
// bottom_axes (none or one per bottom). Not in place. On a GPU each pass is a kernel generated from the program and
// compiled with NVRTC when first run (src/core/formula_gpu.hpp); where it cannot be, the layer runs on the host (the
// values go there and back), saying why once. Not yet run on a GPU.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/formula.hpp"
#include "layers/layer.hpp"

namespace crema {

class FormulaKernels;

class ExpressionLayer : public Layer {
 public:
  explicit ExpressionLayer(const LayerParameter& param, std::shared_ptr<Context> context = nullptr);
  ~ExpressionLayer() override;
  const char* type() const override { return "Expression"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool BackwardReadsTop(int top) const override;
  bool BackwardReadsBottom(int bottom) const override;
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // The graph of the formulas and their gradients (for tests and tools).
  const FormulaGraph& graph() const { return *graph_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Backward's program for the bottoms `wanted` (those it propagates to that a formula reads), made once.
  const FormulaProgram& BackwardProgram(const std::vector<bool>& wanted);
  // The program's kernels on this layer's GPU, compiled on first use; null where they cannot be (no NVRTC, a pass
  // too large for a kernel's arguments: said once in the log) or the layer is not on a GPU: the host runs it.
  FormulaKernels* KernelsFor(const FormulaProgram& program);
  // The inputs backward reads, on `device`.
  std::vector<const float*> BackwardInputs(const std::vector<Blob*>& top, const std::vector<Blob*>& bottom,
                                           Device device) const;

  // The name the formulas call bottom i.
  std::string BottomName(int i) const;
  // The axes bottom i varies over, from bottom_axes or its shape.
  AxisMask BottomAxes(int i, const Blob& blob, const std::vector<int>& full) const;
  // The shape of a value over `axes` (the sizes of those axes, in axis order).
  std::vector<int> ShapeOver(AxisMask axes) const;

  std::unique_ptr<FormulaGraph> graph_;
  int full_ = 0;                       // the largest bottom: its shape gives the axes their sizes
  std::vector<AxisMask> bottom_axes_;  // per bottom
  std::vector<int64_t> dims_;          // per axis, its size now
  std::vector<int> formulas_;          // per top: its formula's node
  std::vector<int> seeds_;             // per top: the input node of its gradient
  std::vector<int> gradients_;         // per bottom: its gradient's node, -1 where no formula reads it
  // The values kept from forward for backward: per kept value, its forward node, the graph input backward reads it
  // as, and where it is (a top's index, or -1: blob, an internal blob).
  struct Kept {
    int node = -1, input = -1, top = -1;
    Blob* blob = nullptr;
  };
  std::vector<Kept> kept_;
  std::vector<Blob*> kept_blobs_;  // internal blobs, made once
  std::vector<bool> reads_bottom_, reads_top_;
  std::unique_ptr<FormulaProgram> forward_;
  // Backward: a program per set of bottoms it propagates to, made when first needed.
  std::map<std::vector<bool>, std::unique_ptr<FormulaProgram>> backward_;
  // Per program, its kernels (null: it runs on the host).
  std::map<const FormulaProgram*, std::unique_ptr<FormulaKernels>> kernels_;
};

}  // namespace crema
