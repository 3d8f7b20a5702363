// Expression: tops computed element by element from formulas over the bottoms, written in the prototxt
// (src/core/formula.hpp for what a formula may say):
//   layer { name: 'swish' type: 'Expression' bottom: 'x' top: 'y' expression_param { formula: 'x * sigmoid(x)' } }
// One formula per top, over the bottoms by blob name (`conv1/out` in backquotes where a name is not an identifier),
// or by the names bottom_name gives them (one per bottom: bottom: 'conv1/out' bottom_name: 'x').
// Every bottom has the shape of the largest, or holds one value, used for every element (a learned scalar, say). A
// top has the largest bottom's shape; a formula that is sum(...) or mean(...) as a whole gives a scalar (shape (),
// as Caffe's losses: with a loss_weight it is a loss).
//
// When the layer is set up each formula is parsed (an error names the layer, the formula and the column) and its
// gradient with respect to every bottom derived symbolically (FormulaGraph::Differentiate): the forward formulas
// and the gradients are each one program that makes one pass over memory, in chunks, on all the threads. A bottom
// that holds one value gets the sum of its elements' gradients. The costly values forward computes and a gradient
// needs (FormulaCostly: sigmoid(x) in x * sigmoid(x)) are kept from forward, in a top where a top is that value, else
// in an internal blob ("<layer>.kept<k>"); backward reads them and computes the rest again, and declares to the
// memory plan only the bottoms and tops it reads.
//
// Params (expression_param): formula (repeated, one per top), bottom_name (none or one per bottom). Not in place.
// On a GPU the programs run on the host for now (the values go there and back); kernels are to come.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/formula.hpp"
#include "layers/layer.hpp"

namespace crema {

class ExpressionLayer : public HostOnGpu<Layer> {
 public:
  using HostOnGpu<Layer>::HostOnGpu;
  const char* type() const override { return "Expression"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool BackwardReadsTop(int top) const override;
  bool BackwardReadsBottom(int bottom) const override;
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  // The graph of the formulas and their gradients, and the node of top k's formula (for tests and tools).
  const FormulaGraph& graph() const { return *graph_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // The name the formulas call bottom i.
  std::string BottomName(int i) const;
  // Bottom i's values as a program's input (broadcast where it holds one value and the elements are more).
  std::vector<FormulaProgram::InputArray> BottomInputs(const std::vector<Blob*>& bottom) const;

  std::unique_ptr<FormulaGraph> graph_;
  std::vector<FormulaGraph::Parsed> formulas_;  // per top
  std::vector<int> seeds_;                      // per top: the input node of its gradient
  std::vector<int> gradients_;                  // per bottom: its gradient's node, -1 where no formula reads it
  // The values kept from forward for backward: per kept value, its forward node, the graph input backward reads it
  // as, and where it is (a top's index, or -1: kept_blobs_[k]).
  struct Kept {
    int node = -1, input = -1, top = -1;
    Blob* blob = nullptr;
  };
  std::vector<Kept> kept_;
  std::vector<Blob*> kept_blobs_;  // internal blobs, made once
  std::vector<bool> reads_bottom_, reads_top_;
  std::unique_ptr<FormulaProgram> forward_;
  // Backward: one program per set of broadcast bottoms (the gradient of a broadcast bottom is summed).
  std::unique_ptr<FormulaProgram> backward_;
  std::vector<bool> backward_broadcast_;
  int64_t elements_ = 0;  // the largest bottom's count
};

}  // namespace crema
