// Formulas: the small element-by-element programs of the Expression layer (layers/common/expression.hpp).
//
// A formula is text over named inputs: numbers, the operators + - * / ^ (power, right-associative) and the
// comparisons < <= > >= == != (1 where true, 0 where not), unary minus, parentheses, and the functions exp log sqrt
// abs tanh sigmoid relu softplus erf (one argument), pow min max (two) and where(condition, a, b) (a where the
// condition is not 0, else b). An input is named by an identifier, or by any text between backquotes (`conv1/out`).
// The whole formula may be a reduction, sum(...) or mean(...) over every element (a loss).
//
// Parsed, a formula is a node of a FormulaGraph: a DAG in which equal subexpressions are one node (hash-consed as
// they are built) and constants are folded. Differentiate adds to the same graph, symbolically, the gradient of a
// node with respect to each input, given a node that stands for the gradient flowing in; the gradients share every
// subexpression with each other and with the forward formula. A FormulaProgram is a set of graph nodes compiled to
// straight-line code over registers; Run evaluates it over arrays in chunks that stay in the L1 cache, so each
// program is one pass over memory whatever the number of operations, on all of OpenMP's threads. Sums (a reduction's
// value, a broadcast input's gradient) are added per chunk and then in chunk order: the same bits whatever the
// thread count.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace crema {

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
  kSign,  // only in gradients: -1, 0 or 1
};

struct FormulaNode {
  FormulaOp op = FormulaOp::kConstant;
  int a = -1, b = -1, c = -1;  // operands (node ids, always lower than the node's own)
  float value = 0.f;           // kConstant
  int input = -1;              // kInput: the input's index
  bool varies = false;         // depends on an input
};

// What a formula reduces to, when it is sum(...) or mean(...) as a whole.
enum class FormulaReduction { kNone, kSum, kMean };

class FormulaGraph {
 public:
  // Inputs are numbered in the order of `input_names`; Parse resolves names against them.
  explicit FormulaGraph(std::vector<std::string> input_names) : input_names_(std::move(input_names)) {}

  struct Parsed {
    int node = -1;
    FormulaReduction reduction = FormulaReduction::kNone;
  };
  // Parses `text`; throws crema::Error "column N: ..." naming what is wrong and where (1-based columns), the known
  // inputs for an unknown name, the known functions for an unknown function.
  Parsed Parse(const std::string& text);

  // Adds the gradient of `node` with respect to every input, the gradient flowing into `node` being node `seed`:
  // per input, a node, or -1 where `node` does not depend on it.
  std::vector<int> Differentiate(int node, int seed);

  // Nodes, made once per distinct operation and operands (constants folded, x + 0, x * 1, x * 0 and the like
  // simplified).
  int Constant(float value);
  int Input(int index);
  int Apply(FormulaOp op, int a, int b = -1, int c = -1);
  // A new input, after those named (a gradient's seed, for one).
  int AddInput(const std::string& name);
  // `root` rebuilt with node k replaced by replace[k] wherever it occurs (a value kept from forward read as an input).
  int Substitute(int root, const std::map<int, int>& replace);
  // Per node: whether one of `roots` (-1s ignored) depends on it.
  std::vector<bool> Reachable(const std::vector<int>& roots) const;

  const std::vector<FormulaNode>& nodes() const { return nodes_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  // The node as text, for messages and tests ("x * sigmoid(x)"): shared subexpressions written out each time, so
  // for small formulas only.
  std::string Describe(int node) const;

 private:
  int Add(const FormulaNode& node);
  std::vector<std::string> input_names_;
  std::vector<FormulaNode> nodes_;
  std::map<std::tuple<int, int, int, int, uint32_t, int>, int> known_;  // (op, a, b, c, value bits, input) -> node
};

// Whether an operation costs much more than a memory access (a transcendental function, a power): such a value,
// computed in forward and needed by a gradient, is worth keeping rather than computing again.
bool FormulaCostly(FormulaOp op);

// Known function names, for messages and documentation.
std::vector<std::string> FormulaFunctions();

// Straight-line code for some nodes of a graph. Each output is written element by element (an array of `count`) or
// summed over the elements (a double); each input is an array of `count` or one value broadcast to every element.
class FormulaProgram {
 public:
  struct Output {
    int node = -1;
    bool sum = false;  // sum over the elements instead of writing them
  };
  FormulaProgram(const FormulaGraph& graph, const std::vector<Output>& outputs);

  struct InputArray {
    const float* data = nullptr;
    bool broadcast = false;  // one value for every element
  };
  // Evaluates the outputs for elements 0 .. count-1. `inputs` is indexed as the graph's inputs (unused ones may be
  // null); `outputs[k]` receives output k's elements, or `sums[k]` its sum (sums has one entry per output). With
  // `accumulate`, element outputs are added to what `outputs[k]` holds.
  void Run(int64_t count, const std::vector<InputArray>& inputs, const std::vector<float*>& outputs,
           std::vector<double>* sums, bool accumulate = false) const;
  // Registers used and instructions run per element: the size of the program.
  int registers() const { return registers_; }
  int instructions() const { return static_cast<int>(code_.size()); }

 private:
  struct Instruction {
    FormulaOp op;
    int out, a, b, c;  // registers
    float value;       // kConstant
    int input;         // kInput
  };
  std::vector<Instruction> code_;
  std::vector<int> output_registers_;
  std::vector<Output> outputs_;
  int registers_ = 0;
};

}  // namespace crema
