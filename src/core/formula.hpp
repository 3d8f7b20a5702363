// Formulas: the small programs of the Expression layer (layers/common/expression.hpp).
//
// A formula is text over named inputs: numbers, the operators + - * / ^ (power, right-associative) and the
// comparisons < <= > >= == != (1 where true, 0 where not), unary minus, parentheses, and the functions exp log sqrt
// abs tanh sigmoid relu softplus erf (one argument), pow min max (two) and where(condition, a, b) (a where the
// condition is not 0, else b). An input is named by an identifier, or by any text between backquotes (`conv1/out`).
//
// Values vary over named axes (at most 16: "n c h w", say). Each input varies over some of them, and an operation's
// value over the axes of its operands together: an input over c alone is broadcast along n, h and w. The reductions
// sum mean max min take a value over the axes in brackets (sum[h, w](x)), or over every axis without them (sum(x));
// the result no longer varies over those axes. max and min with two arguments are the element-wise functions.
//
// Parsed, a formula is a node of a FormulaGraph: a DAG in which equal subexpressions are one node (hash-consed as
// they are built) and constants are folded. Differentiate adds to the same graph, symbolically, the gradient of a
// node with respect to each input, given a node that stands for the gradient flowing in; the gradients share every
// subexpression with each other and with the forward formula, and the gradient reaching a value broadcast along
// axes is summed over them. A FormulaProgram is a set of graph nodes compiled to straight-line code over registers,
// in passes: one per reduction, then one per set of outputs over the same axes. Run evaluates each pass over the
// arrays in chunks that stay in the L1 cache, on all of OpenMP's threads; a pass is one sweep over memory whatever
// the number of operations. A reduction adds each of its values in a fixed order of fixed blocks: the same bits
// whatever the thread count.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace crema {

// A set of axes, one bit per axis of a graph.
using AxisMask = uint32_t;
constexpr int kFormulaMostAxes = 16;

enum class FormulaOp {
  kConstant,
  kInput,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kAbs,
  kTanh,
  kSigmoid,
  kRelu,
  kSoftplus,
  kErf,
  kMin,
  kMax,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kEqual,
  kNotEqual,
  kWhere,
  kSign,       // only in gradients: -1, 0 or 1
  kReduceSum,  // over the axes `reduce`
  kReduceMax,
  kReduceMin,
  kCount,  // the number of elements along the axes `reduce` (a mean's divisor), known when the program runs
};

struct FormulaNode {
  FormulaOp op = FormulaOp::kConstant;
  int a = -1, b = -1, c = -1;  // operands (node ids, always lower than the node's own)
  float value = 0.f;           // kConstant
  int input = -1;              // kInput: the input's index
  AxisMask reduce = 0;         // reductions: the axes reduced; kCount: the axes counted
  AxisMask axes = 0;           // the axes the value varies over
  bool varies = false;         // depends on an input
};

bool FormulaReduces(FormulaOp op);

class FormulaGraph {
 public:
  // Inputs are numbered in the order of `input_names`; Parse resolves names against them. Input i varies over
  // input_axes[i] (every axis where not given).
  explicit FormulaGraph(std::vector<std::string> input_names, std::vector<std::string> axis_names = {},
                        std::vector<AxisMask> input_axes = {});

  // Parses `text` into a node; throws crema::Error "column N: ..." naming what is wrong and where (1-based columns),
  // the known inputs for an unknown name, the known functions for an unknown function, the axes for an unknown axis.
  int Parse(const std::string& text);

  // Adds the gradient of `node` with respect to every input, the gradient flowing into `node` being node `seed`:
  // per input, a node (over at most the input's axes), or -1 where `node` does not depend on it.
  std::vector<int> Differentiate(int node, int seed);

  // Nodes, made once per distinct operation and operands (constants folded, x + 0, x * 1, x * 0 and the like
  // simplified).
  int Constant(float value);
  int Input(int index);
  int Apply(FormulaOp op, int a, int b = -1, int c = -1);
  // kReduceSum, kReduceMax or kReduceMin of `a` over `axes`.
  int Reduce(FormulaOp op, int a, AxisMask axes);
  int Count(AxisMask axes);
  // A new input, after those named (a gradient's seed, for one), varying over `axes`.
  int AddInput(const std::string& name, AxisMask axes);
  // `root` rebuilt with node k replaced by replace[k] wherever it occurs (a value kept from forward read as an input).
  int Substitute(int root, const std::map<int, int>& replace);
  // Per node: whether one of `roots` (-1s ignored) depends on it.
  std::vector<bool> Reachable(const std::vector<int>& roots) const;

  const std::vector<FormulaNode>& nodes() const { return nodes_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  AxisMask all_axes() const { return static_cast<AxisMask>((uint64_t{1} << axis_names_.size()) - 1); }
  // The node as text, for messages and tests ("x * sigmoid(x)"): shared subexpressions written out each time, so
  // for small formulas only.
  std::string Describe(int node) const;
  // The same with input k written as names[k] (a formula substituted for it, in parentheses).
  std::string Describe(int node, const std::vector<std::string>& names) const;
  // Axes as text: "h, w".
  std::string DescribeAxes(AxisMask axes) const;

 private:
  int Add(const FormulaNode& node);
  // A node like `node` with other operands.
  int Rebuild(const FormulaNode& node, int a, int b, int c);
  std::vector<std::string> input_names_, axis_names_;
  std::vector<AxisMask> input_axes_;
  std::vector<FormulaNode> nodes_;
  // (op, a, b, c, value bits, input, reduce) -> node
  std::map<std::tuple<int, int, int, int, uint32_t, int, AxisMask>, int> known_;
};

// Whether an operation costs much more than a memory access (a transcendental function, a power, a reduction): such
// a value, computed in forward and needed by a gradient, is worth keeping rather than computing again.
bool FormulaCostly(FormulaOp op);

// Known function names, for messages and documentation.
std::vector<std::string> FormulaFunctions();

// Straight-line code for some nodes of a graph, in passes (above). Every array is laid out over its axes in the
// graph's axis order, the last fastest (row-major), the size of each axis given to Run.
class FormulaProgram {
 public:
  struct Output {
    int node = -1;
    AxisMask axes = 0;  // the output's axes: the node's and perhaps more (the value repeated along them)
  };
  FormulaProgram(const FormulaGraph& graph, const std::vector<Output>& outputs);

  // Evaluates the outputs. `dims` holds the size of each axis; `inputs` is indexed as the graph's inputs, each over
  // its axes (unused ones may be null); `outputs[k]` receives output k. With `accumulate`, outputs are added to what
  // they hold.
  void Run(const std::vector<int64_t>& dims, const std::vector<const float*>& inputs,
           const std::vector<float*>& outputs, bool accumulate = false) const;
  // The CUDA C++ source of a kernel per pass, named "<name>_<pass>" (src/core/formula_gpu.hpp compiles it with NVRTC
  // and runs it). Each takes one FormulaKernelArgs (declared in the source; kFormulaKernel* bound its arrays);
  // throws crema::Error where a pass reads or writes more arrays than that holds.
  std::string CudaSource(const std::string& name) const;
  // The arrays, sizes and constants one kernel of CudaSource is given, as the source declares them.
  static constexpr int kFormulaKernelLeaves = 12, kFormulaKernelOutputs = 12, kFormulaKernelCounts = 16;
  // The number of passes over memory, and the instructions run per element, over all passes.
  int passes() const { return static_cast<int>(passes_.size()); }
  int instructions() const;

 private:
  struct Instruction {
    FormulaOp op;
    int out, a, b, c;  // registers
    float value;       // kConstant
    int leaf;          // kInput: the pass's leaf it reads
    AxisMask count;    // kCount: the axes counted
  };
  // What a pass reads: a graph input, or a buffer an earlier pass reduced into.
  struct Leaf {
    int input = -1, buffer = -1;
    AxisMask axes = 0;
  };
  struct Pass {
    AxisMask loop = 0;     // the axes iterated
    AxisMask reduced = 0;  // a reduction: the axes reduced (iterated innermost); 0: element outputs
    FormulaOp reduce = FormulaOp::kConstant;
    int buffer = -1;  // a reduction: the buffer it fills
    std::vector<Instruction> code;
    int registers = 0;
    std::vector<Leaf> leaves;
    std::vector<int> results;  // per value the pass produces, its register
    std::vector<int> outputs;  // element passes: the program's outputs, one per result
  };
  // A pass's iteration for the axes' sizes `dims`: its sizes (outer first; the axes of one element left out), its
  // elements, the elements each value of a reduction reduces, per leaf the step along each axis of the iteration and
  // whether it is read straight (its layout the iteration's), per instruction its constant (a count's, of these
  // sizes).
  struct Layout {
    std::vector<int64_t> sizes;
    int64_t total = 0, reduced = 1;
    std::vector<std::vector<int64_t>> strides;
    std::vector<bool> straight;
    std::vector<float> values;
  };
  Layout PassLayout(const Pass& pass, const std::vector<int64_t>& dims) const;
  friend class FormulaKernels;
  Pass Compile(const FormulaGraph& graph, const std::vector<int>& roots, const std::vector<int>& buffer_of) const;
  void RunPass(const Pass& pass, const std::vector<int64_t>& dims, const std::vector<const float*>& inputs,
               std::vector<std::vector<float>>& buffers, const std::vector<float*>& outputs, bool accumulate) const;

  std::vector<Pass> passes_;
  std::vector<AxisMask> buffer_axes_;  // per reduction buffer
  std::vector<Output> outputs_;
};

}  // namespace crema
