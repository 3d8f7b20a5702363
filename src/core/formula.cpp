#include "core/formula.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "core/common.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

struct FunctionInfo {
  const char* name;
  FormulaOp op;
  int arguments;
};

const FunctionInfo kFunctions[] = {
    {"exp", FormulaOp::kExp, 1},     {"log", FormulaOp::kLog, 1},           {"sqrt", FormulaOp::kSqrt, 1},
    {"abs", FormulaOp::kAbs, 1},     {"tanh", FormulaOp::kTanh, 1},         {"sigmoid", FormulaOp::kSigmoid, 1},
    {"relu", FormulaOp::kRelu, 1},   {"softplus", FormulaOp::kSoftplus, 1}, {"erf", FormulaOp::kErf, 1},
    {"pow", FormulaOp::kPow, 2},     {"min", FormulaOp::kMin, 2},           {"max", FormulaOp::kMax, 2},
    {"where", FormulaOp::kWhere, 3},
};

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// e^x in float without branches or calls, so that a loop of it vectorises: x = n ln2 + r with |r| <= ln2 / 2, e^r by
// its Taylor series to r^7 (the rest under 1e-8 of it), times 2^n made in the exponent's bits (in two halves, so
// that n = 128 does not overflow). Within a few ulp of std::exp; 0 below -87.3 (where std::exp gives denormals),
// infinity above 88.72, NaN for NaN.
CREMA_ALWAYS_INLINE float FastExp(float x) {
  const float clamped = x < -87.3f ? -87.3f : (x > 88.72f ? 88.72f : x);  // NaN stays NaN
  constexpr float kShifter = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer, left in the low bits
  const float shifted = clamped * 1.44269504f + kShifter;
  const float n = shifted - kShifter;
  const float r = (clamped - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 in two parts
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  uint32_t shifted_bits, shifter_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof(float));
  const float shifter = kShifter;
  std::memcpy(&shifter_bits, &shifter, sizeof(float));
  const uint32_t e = shifted_bits - shifter_bits;  // n, in two's complement
  const uint32_t half = static_cast<uint32_t>(static_cast<int32_t>(e) >> 1);
  const uint32_t low_bits = (half + 127u) << 23, high_bits = (e - half + 127u) << 23;
  float low, high;
  std::memcpy(&low, &low_bits, sizeof(float));
  std::memcpy(&high, &high_bits, sizeof(float));
  const float value = p * low * high;
  return x > 88.72f ? std::numeric_limits<float>::infinity() : (x < -87.3f ? 0.f : value);
}

// tanh without calls: the odd Taylor series to x^15 below 0.4 (the rest under 1e-9), 1 - 2 / (e^2|x| + 1) above.
CREMA_ALWAYS_INLINE float FastTanh(float x) {
  const float x2 = x * x;
  float p = static_cast<float>(-929569.0 / 638512875.0);
  p = p * x2 + static_cast<float>(21844.0 / 6081075.0);
  p = p * x2 - static_cast<float>(1382.0 / 155925.0);
  p = p * x2 + static_cast<float>(62.0 / 2835.0);
  p = p * x2 - static_cast<float>(17.0 / 315.0);
  p = p * x2 + static_cast<float>(2.0 / 15.0);
  p = p * x2 - static_cast<float>(1.0 / 3.0);
  const float small = x + x * x2 * p;
  const float magnitude = std::fabs(x);
  const float large = 1.f - 2.f / (FastExp(2.f * magnitude) + 1.f);
  return magnitude < 0.4f ? small : std::copysign(large, x);
}

// One element of an operation, as the program and constant folding compute it: one definition per operation.
template <FormulaOp kOp>
CREMA_ALWAYS_INLINE float Element(float a, float b, float c) {
  if constexpr (kOp == FormulaOp::kAdd) return a + b;
  if constexpr (kOp == FormulaOp::kSub) return a - b;
  if constexpr (kOp == FormulaOp::kMul) return a * b;
  if constexpr (kOp == FormulaOp::kDiv) return a / b;
  if constexpr (kOp == FormulaOp::kPow) return std::pow(a, b);
  if constexpr (kOp == FormulaOp::kNeg) return -a;
  if constexpr (kOp == FormulaOp::kExp) return FastExp(a);
  if constexpr (kOp == FormulaOp::kLog) return std::log(a);
  if constexpr (kOp == FormulaOp::kSqrt) return std::sqrt(a);
  if constexpr (kOp == FormulaOp::kAbs) return std::fabs(a);
  if constexpr (kOp == FormulaOp::kTanh) return FastTanh(a);
  if constexpr (kOp == FormulaOp::kSigmoid) return 1.f / (1.f + FastExp(-a));
  if constexpr (kOp == FormulaOp::kRelu) return a > 0.f ? a : 0.f;
  // log(1 + e^a) without overflow: max(a, 0) + log1p(e^-|a|).
  if constexpr (kOp == FormulaOp::kSoftplus) return std::max(a, 0.f) + std::log1p(std::exp(-std::fabs(a)));
  if constexpr (kOp == FormulaOp::kErf) return std::erf(a);
  if constexpr (kOp == FormulaOp::kMin) return std::min(a, b);
  if constexpr (kOp == FormulaOp::kMax) return std::max(a, b);
  if constexpr (kOp == FormulaOp::kLess) return a < b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kLessEqual) return a <= b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kGreater) return a > b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kGreaterEqual) return a >= b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kEqual) return a == b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kNotEqual) return a != b ? 1.f : 0.f;
  if constexpr (kOp == FormulaOp::kWhere) return a != 0.f ? b : c;
  if constexpr (kOp == FormulaOp::kSign) return a > 0.f ? 1.f : a < 0.f ? -1.f : 0.f;
  return 0.f;  // constants and inputs are not computed
}

// The element operations, each as X(name).
#define CREMA_FORMULA_ELEMENT_OPS(X)                                                                                  \
  X(kAdd)                                                                                                             \
  X(kSub) X(kMul) X(kDiv) X(kPow) X(kNeg) X(kExp) X(kLog) X(kSqrt) X(kAbs) X(kTanh) X(kSigmoid) X(kRelu) X(kSoftplus) \
      X(kErf) X(kMin) X(kMax) X(kLess) X(kLessEqual) X(kGreater) X(kGreaterEqual) X(kEqual) X(kNotEqual) X(kWhere)    \
          X(kSign)

// Calls `f(std::integral_constant<FormulaOp, op>{})` for the operation `op` names at run time, so that `f` sees it
// as a constant.
template <typename F>
auto Dispatch(FormulaOp op, F&& f) {
  using O = FormulaOp;
  switch (op) {
#define CREMA_FORMULA_CASE(name) \
  case O::name:                  \
    return f(std::integral_constant<O, O::name>{});
    CREMA_FORMULA_ELEMENT_OPS(CREMA_FORMULA_CASE)
#undef CREMA_FORMULA_CASE
    default:  // constants, inputs, reductions and counts are not element operations
      break;
  }
  return f(std::integral_constant<O, O::kConstant>{});
}

float Evaluate(FormulaOp op, float a, float b, float c) {
  return Dispatch(op, [&](auto k) { return Element<decltype(k)::value>(a, b, c); });
}

constexpr int Arity(FormulaOp op) {
  switch (op) {
    case FormulaOp::kConstant:
    case FormulaOp::kInput:
    case FormulaOp::kCount:
      return 0;
    case FormulaOp::kReduceSum:
    case FormulaOp::kReduceMax:
    case FormulaOp::kReduceMin:
    case FormulaOp::kNeg:
    case FormulaOp::kExp:
    case FormulaOp::kLog:
    case FormulaOp::kSqrt:
    case FormulaOp::kAbs:
    case FormulaOp::kTanh:
    case FormulaOp::kSigmoid:
    case FormulaOp::kRelu:
    case FormulaOp::kSoftplus:
    case FormulaOp::kErf:
    case FormulaOp::kSign:
      return 1;
    case FormulaOp::kWhere:
      return 3;
    default:
      return 2;
  }
}

bool Commutes(FormulaOp op) {
  return op == FormulaOp::kAdd || op == FormulaOp::kMul || op == FormulaOp::kMin || op == FormulaOp::kMax ||
         op == FormulaOp::kEqual || op == FormulaOp::kNotEqual;
}

// The recursive-descent parser. Grammar (lowest precedence first):
//   comparison := sum [("<" | "<=" | ">" | ">=" | "==" | "!=") sum]
//   sum        := product {("+" | "-") product}
//   product    := unary {("*" | "/") unary}
//   unary      := "-" unary | power
//   power      := primary ["^" unary]
//   primary    := number | name | `name` | function ["[" axis {[","] axis} "]"] "(" comparison {"," comparison} ")"
//               | "(" comparison ")"
class Parser {
 public:
  Parser(FormulaGraph* graph, const std::string& text) : graph_(graph), text_(text) {}

  int ParseWhole() {
    const int node = Comparison();
    Skip();
    if (pos_ < text_.size()) Fail("unexpected '" + std::string(1, text_[pos_]) + "' after a complete formula");
    return node;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw Error("column " + std::to_string(pos_ + 1) + ": " + what + " in formula \"" + text_ + "\"");
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Accept(const char* token) {
    Skip();
    const size_t length = std::strlen(token);
    if (text_.compare(pos_, length, token) != 0) return false;
    pos_ += length;
    return true;
  }
  void Expect(char c, const std::string& why) {
    Skip();
    if (pos_ >= text_.size()) Fail(std::string("expected '") + c + "' " + why + ", found the end");
    if (text_[pos_] != c) Fail(std::string("expected '") + c + "' " + why + ", found '" + text_[pos_] + "'");
    ++pos_;
  }

  int Comparison() {
    // Each level of parentheses or function call recurses: a bound keeps a hostile formula from the stack's end.
    if (++depth_ > kMostDepth) Fail("more than " + std::to_string(kMostDepth) + " nested parentheses and calls");
    const int left = Sum();
    --depth_;
    Skip();
    static const std::pair<const char*, FormulaOp> kComparisons[] = {
        {"<=", FormulaOp::kLessEqual}, {">=", FormulaOp::kGreaterEqual}, {"==", FormulaOp::kEqual},
        {"!=", FormulaOp::kNotEqual},  {"<", FormulaOp::kLess},          {">", FormulaOp::kGreater}};
    for (const auto& [token, op] : kComparisons)
      if (Accept(token)) return graph_->Apply(op, left, Sum());
    return left;
  }
  // One level of left-associative operators (two of them) over the operands `next` parses.
  template <typename Next>
  int LeftAssociative(const std::pair<const char*, FormulaOp> (&operators)[2], Next next) {
    int node = next();
    for (;;) {
      const auto* found = std::find_if(std::begin(operators), std::end(operators),
                                       [this](const std::pair<const char*, FormulaOp>& o) { return Accept(o.first); });
      if (found == std::end(operators)) return node;
      node = graph_->Apply(found->second, node, next());
    }
  }
  int Sum() {
    static const std::pair<const char*, FormulaOp> kOperators[2] = {{"+", FormulaOp::kAdd}, {"-", FormulaOp::kSub}};
    return LeftAssociative(kOperators, [this] { return Product(); });
  }
  int Product() {
    static const std::pair<const char*, FormulaOp> kOperators[2] = {{"*", FormulaOp::kMul}, {"/", FormulaOp::kDiv}};
    return LeftAssociative(kOperators, [this] { return Unary(); });
  }
  // A run of signs before an operand ("- - + x"): whether they negate it. A loop, however long the run.
  bool Negated() {
    bool negated = false;
    for (;;) {
      if (Accept("-")) {
        negated = !negated;
      } else if (!Accept("+")) {
        return negated;
      }
    }
  }
  int Unary() {
    const bool negated = Negated();
    const int node = Power();
    return negated ? graph_->Apply(FormulaOp::kNeg, node) : node;
  }
  int Power() {
    // base ^ [signs] p1 ^ [signs] p2 ...: right-associative, each exponent with its own signs, folded from the right
    // (a loop, not a recursion, however long the chain).
    const int base = Primary();
    std::vector<std::pair<int, bool>> exponents;  // operand, negated
    while (Accept("^")) {
      const bool negated = Negated();
      exponents.emplace_back(Primary(), negated);
    }
    if (exponents.empty()) return base;
    int folded = -1;
    for (size_t k = exponents.size(); k-- > 0;) {
      const int value = folded < 0 ? exponents[k].first : graph_->Apply(FormulaOp::kPow, exponents[k].first, folded);
      folded = exponents[k].second ? graph_->Apply(FormulaOp::kNeg, value) : value;
    }
    return graph_->Apply(FormulaOp::kPow, base, folded);
  }
  int Primary() {
    Skip();
    if (pos_ >= text_.size()) Fail("expected a number, a name or '(', found the end");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      const int node = Comparison();
      Expect(')', "to close '('");
      return node;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* start = text_.c_str() + pos_;
      char* end = nullptr;
      const double value = std::strtod(start, &end);
      if (end == start) Fail("a malformed number");
      pos_ += static_cast<size_t>(end - start);
      return graph_->Constant(static_cast<float>(value));
    }
    if (c == '`') {
      const size_t close = text_.find('`', pos_ + 1);
      if (close == std::string::npos) Fail("a name opened with ` is not closed");
      const std::string name = text_.substr(pos_ + 1, close - pos_ - 1);
      const size_t at = pos_;
      pos_ = close + 1;
      return Name(name, at);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t at = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      const std::string name = text_.substr(at, pos_ - at);
      Skip();
      if (pos_ < text_.size() && (text_[pos_] == '(' || text_[pos_] == '[')) return Call(name, at);
      return Name(name, at);
    }
    Fail(std::string("unexpected '") + c + "'");
  }
  int Name(const std::string& name, size_t at) {
    const auto& names = graph_->input_names();
    const auto found = std::find(names.begin(), names.end(), name);
    if (found != names.end()) return graph_->Input(static_cast<int>(found - names.begin()));
    pos_ = at;
    std::string known;
    for (const std::string& input : names) known += (known.empty() ? "" : ", ") + input;
    Fail("unknown name '" + name + "' (the inputs: " + known + ")");
  }
  // The axes in brackets after a reduction's name, "[h, w]" (commas optional).
  AxisMask Axes(const std::string& function) {
    Expect('[', "");
    AxisMask axes = 0;
    for (;;) {
      Skip();
      if (pos_ < text_.size() && text_[pos_] == ']') break;
      const size_t at = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      const std::string axis = text_.substr(at, pos_ - at);
      const auto& names = graph_->axis_names();
      const auto found = std::find(names.begin(), names.end(), axis);
      if (axis.empty() || found == names.end()) {
        pos_ = at;
        std::string known;
        for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
        if (axis.empty()) Fail("expected an axis or ']' in " + function + "[...]");
        Fail("unknown axis '" + axis + "' (the axes: " + (known.empty() ? "none" : known) + ")");
      }
      axes |= AxisMask{1} << (found - names.begin());
      Accept(",");
    }
    ++pos_;
    if (axes == 0) Fail(function + "[] names no axis (without brackets it reduces over every axis)");
    return axes;
  }
  int Call(const std::string& name, size_t at) {
    const bool reduction = name == "sum" || name == "mean" || name == "max" || name == "min";
    const FunctionInfo* function = nullptr;
    for (const FunctionInfo& f : kFunctions)
      if (name == f.name) function = &f;
    if (function == nullptr && !reduction) {
      pos_ = at;
      std::string known;
      for (const std::string& f : FormulaFunctions()) known += (known.empty() ? "" : ", ") + f;
      Fail("unknown function '" + name + "' (known: " + known + ")");
    }
    Skip();
    const bool bracketed = pos_ < text_.size() && text_[pos_] == '[';
    if (bracketed && !reduction) Fail("only sum, mean, max and min take axes in brackets");
    const AxisMask axes = bracketed ? Axes(name) : graph_->all_axes();
    Expect('(', "after " + name + (bracketed ? "[...]" : ""));
    std::vector<int> arguments{Comparison()};
    while (Accept(",")) arguments.push_back(Comparison());
    // max and min with two arguments are element-wise; with one (or axes), and sum and mean, reductions.
    const bool reduces = reduction && (bracketed || function == nullptr || arguments.size() == 1);
    const int expected = reduces ? 1 : function->arguments;
    if (static_cast<int>(arguments.size()) != expected) {
      pos_ = at;
      Fail(name + (bracketed ? "[...]" : "") + " takes " + std::to_string(expected) + " argument" +
           (expected == 1 ? "" : "s") + ", got " + std::to_string(arguments.size()));
    }
    Expect(')', "to close " + name + "(");
    if (reduces) {
      if (name == "sum") return graph_->Reduce(FormulaOp::kReduceSum, arguments[0], axes);
      if (name == "max") return graph_->Reduce(FormulaOp::kReduceMax, arguments[0], axes);
      if (name == "min") return graph_->Reduce(FormulaOp::kReduceMin, arguments[0], axes);
      return graph_->Apply(FormulaOp::kDiv, graph_->Reduce(FormulaOp::kReduceSum, arguments[0], axes),
                           graph_->Count(axes));
    }
    arguments.resize(3, -1);
    return graph_->Apply(function->op, arguments[0], arguments[1], arguments[2]);
  }

  static constexpr int kMostDepth = 200;
  FormulaGraph* graph_;
  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<std::string> FormulaFunctions() {
  std::vector<std::string> names;
  for (const FunctionInfo& f : kFunctions) names.push_back(f.name);
  names.push_back("sum");
  names.push_back("mean");
  return names;
}

bool FormulaReduces(FormulaOp op) {
  return op == FormulaOp::kReduceSum || op == FormulaOp::kReduceMax || op == FormulaOp::kReduceMin;
}

FormulaGraph::FormulaGraph(std::vector<std::string> input_names, std::vector<std::string> axis_names,
                           std::vector<AxisMask> input_axes)
    : input_names_(std::move(input_names)), axis_names_(std::move(axis_names)), input_axes_(std::move(input_axes)) {
  if (axis_names_.size() > static_cast<size_t>(kFormulaMostAxes))
    throw Error("a formula has at most " + std::to_string(kFormulaMostAxes) + " axes, not " +
                std::to_string(axis_names_.size()));
  if (input_axes_.empty()) input_axes_.assign(input_names_.size(), all_axes());
  if (input_axes_.size() != input_names_.size())
    throw Error("formula inputs: " + std::to_string(input_names_.size()) + " names but " +
                std::to_string(input_axes_.size()) + " sets of axes");
  for (AxisMask& axes : input_axes_) axes &= all_axes();
}

int FormulaGraph::Parse(const std::string& text) { return Parser(this, text).ParseWhole(); }

int FormulaGraph::Add(const FormulaNode& node) {
  const auto key =
      std::make_tuple(static_cast<int>(node.op), node.a, node.b, node.c, Bits(node.value), node.input, node.reduce);
  const auto found = known_.find(key);
  if (found != known_.end()) return found->second;
  nodes_.push_back(node);
  const int id = static_cast<int>(nodes_.size()) - 1;
  known_.emplace(key, id);
  return id;
}

int FormulaGraph::Constant(float value) {
  FormulaNode node;
  node.value = value;
  return Add(node);
}

int FormulaGraph::Input(int index) {
  FormulaNode node;
  node.op = FormulaOp::kInput;
  node.input = index;
  node.axes = input_axes_.at(static_cast<size_t>(index));
  node.varies = true;
  return Add(node);
}

int FormulaGraph::AddInput(const std::string& name, AxisMask axes) {
  input_names_.push_back(name);
  input_axes_.push_back(axes & all_axes());
  return Input(static_cast<int>(input_names_.size()) - 1);
}

int FormulaGraph::Count(AxisMask axes) {
  if (axes == 0) return Constant(1.f);
  FormulaNode node;
  node.op = FormulaOp::kCount;
  node.reduce = axes;
  return Add(node);
}

int FormulaGraph::Reduce(FormulaOp op, int a, AxisMask axes) {
  CREMA_CHECK(FormulaReduces(op)) << "not a reduction";
  // Along axes the value does not vary over, a sum is a product and a maximum the value itself.
  const AxisMask along = axes & nodes_[a].axes;
  if (along != axes && op == FormulaOp::kReduceSum) {
    const int count = Count(axes & ~along);
    return along == 0 ? Apply(FormulaOp::kMul, a, count) : Apply(FormulaOp::kMul, Reduce(op, a, along), count);
  }
  if (along == 0) return a;
  FormulaNode node;
  node.op = op;
  node.a = a;
  node.reduce = along;
  node.axes = nodes_[a].axes & ~along;
  node.varies = nodes_[a].varies;
  return Add(node);
}

int FormulaGraph::Rebuild(const FormulaNode& node, int a, int b, int c) {
  if (FormulaReduces(node.op)) return Reduce(node.op, a, node.reduce);
  if (node.op == FormulaOp::kCount) return Count(node.reduce);
  return Apply(node.op, a, b, c);
}

int FormulaGraph::Apply(FormulaOp op, int a, int b, int c) {
  CREMA_CHECK(!FormulaReduces(op) && op != FormulaOp::kCount && op != FormulaOp::kInput && op != FormulaOp::kConstant)
      << "FormulaGraph::Apply takes element operations";
  const auto is_constant = [&](int n, float value) {
    return n >= 0 && nodes_[n].op == FormulaOp::kConstant && Bits(nodes_[n].value) == Bits(value);
  };
  const int arity = Arity(op);
  bool constant = true;
  for (int k = 0; k < arity; ++k) constant = constant && nodes_[k == 0 ? a : k == 1 ? b : c].op == FormulaOp::kConstant;
  if (constant) {
    return Constant(
        Evaluate(op, nodes_[a].value, arity > 1 ? nodes_[b].value : 0.f, arity > 2 ? nodes_[c].value : 0.f));
  }
  // Simplifications that keep the value of every finite input.
  switch (op) {
    case FormulaOp::kAdd:
      if (is_constant(a, 0.f)) return b;
      if (is_constant(b, 0.f)) return a;
      break;
    case FormulaOp::kSub:
      if (is_constant(b, 0.f)) return a;
      if (is_constant(a, 0.f)) return Apply(FormulaOp::kNeg, b);
      break;
    case FormulaOp::kMul:
      if (is_constant(a, 1.f)) return b;
      if (is_constant(b, 1.f)) return a;
      if (is_constant(a, 0.f) || is_constant(b, 0.f)) return Constant(0.f);
      if (is_constant(a, -1.f)) return Apply(FormulaOp::kNeg, b);
      if (is_constant(b, -1.f)) return Apply(FormulaOp::kNeg, a);
      break;
    case FormulaOp::kDiv:
      if (is_constant(b, 1.f)) return a;
      if (is_constant(a, 0.f)) return Constant(0.f);
      break;
    case FormulaOp::kPow:
      if (is_constant(b, 1.f)) return a;
      if (is_constant(b, 2.f)) return Apply(FormulaOp::kMul, a, a);
      if (is_constant(b, 0.5f)) return Apply(FormulaOp::kSqrt, a);
      break;
    case FormulaOp::kNeg:
      if (nodes_[a].op == FormulaOp::kNeg) return nodes_[a].a;
      break;
    case FormulaOp::kWhere:
      if (b == c) return b;
      if (nodes_[a].op == FormulaOp::kConstant) return nodes_[a].value != 0.f ? b : c;
      break;
    default:
      break;
  }
  if (Commutes(op) && b < a) std::swap(a, b);
  FormulaNode node;
  node.op = op;
  node.a = a;
  node.b = arity > 1 ? b : -1;
  node.c = arity > 2 ? c : -1;
  node.varies = nodes_[a].varies || (arity > 1 && nodes_[b].varies) || (arity > 2 && nodes_[c].varies);
  node.axes = nodes_[a].axes | (arity > 1 ? nodes_[b].axes : 0) | (arity > 2 ? nodes_[c].axes : 0);
  return Add(node);
}

std::vector<int> FormulaGraph::Differentiate(int root, int seed) {
  // Reverse mode over the DAG: a node's operands have lower ids, so walking the ids down visits every node after
  // all the nodes that use it, with its adjoint complete.
  std::vector<int> adjoint(root + 1, -1);
  adjoint[root] = seed;
  std::vector<int> gradients(input_names_.size(), -1);
  const auto add_to = [&](int node, int term) {
    if (node < 0 || !nodes_[node].varies || term < 0) return;
    // A value broadcast along axes gets the sum of the gradients along them.
    const AxisMask broadcast = nodes_[term].axes & ~nodes_[node].axes;
    if (broadcast != 0) term = Reduce(FormulaOp::kReduceSum, term, broadcast);
    adjoint[node] = adjoint[node] < 0 ? term : Apply(FormulaOp::kAdd, adjoint[node], term);
  };
  const int zero = Constant(0.f), one = Constant(1.f);
  for (int n = root; n >= 0; --n) {
    const int g = adjoint[n];
    if (g < 0) continue;
    // Copies: Apply may grow nodes_.
    const FormulaNode node = nodes_[n];
    const int a = node.a, b = node.b, c = node.c;
    const auto mul = [&](int x, int y) { return Apply(FormulaOp::kMul, x, y); };
    switch (node.op) {
      case FormulaOp::kInput:
        gradients[node.input] = g;
        break;
      case FormulaOp::kAdd:
        add_to(a, g);
        add_to(b, g);
        break;
      case FormulaOp::kSub:
        add_to(a, g);
        if (nodes_[b].varies) add_to(b, Apply(FormulaOp::kNeg, g));
        break;
      case FormulaOp::kMul:
        if (nodes_[a].varies) add_to(a, mul(g, b));
        if (nodes_[b].varies) add_to(b, mul(g, a));
        break;
      case FormulaOp::kDiv:
        if (nodes_[a].varies) add_to(a, Apply(FormulaOp::kDiv, g, b));
        // d(a / b)/db = -(a / b) / b
        if (nodes_[b].varies) add_to(b, Apply(FormulaOp::kNeg, mul(g, Apply(FormulaOp::kDiv, n, b))));
        break;
      case FormulaOp::kPow:
        // d(a^b)/da = b * a^(b - 1); d(a^b)/db = a^b * log(a)
        if (nodes_[a].varies) add_to(a, mul(g, mul(b, Apply(FormulaOp::kPow, a, Apply(FormulaOp::kSub, b, one)))));
        if (nodes_[b].varies) add_to(b, mul(g, mul(n, Apply(FormulaOp::kLog, a))));
        break;
      case FormulaOp::kNeg:
        add_to(a, Apply(FormulaOp::kNeg, g));
        break;
      case FormulaOp::kExp:
        add_to(a, mul(g, n));
        break;
      case FormulaOp::kLog:
        add_to(a, Apply(FormulaOp::kDiv, g, a));
        break;
      case FormulaOp::kSqrt:
        add_to(a, Apply(FormulaOp::kDiv, mul(g, Constant(0.5f)), n));
        break;
      case FormulaOp::kAbs:
        add_to(a, mul(g, Apply(FormulaOp::kSign, a)));
        break;
      case FormulaOp::kTanh:
        add_to(a, mul(g, Apply(FormulaOp::kSub, one, mul(n, n))));
        break;
      case FormulaOp::kSigmoid:
        add_to(a, mul(g, mul(n, Apply(FormulaOp::kSub, one, n))));
        break;
      case FormulaOp::kRelu:
        add_to(a, Apply(FormulaOp::kWhere, Apply(FormulaOp::kGreater, a, zero), g, zero));
        break;
      case FormulaOp::kSoftplus:
        add_to(a, mul(g, Apply(FormulaOp::kSigmoid, a)));
        break;
      case FormulaOp::kErf:
        // 2 / sqrt(pi) * e^(-a^2)
        add_to(a,
               mul(g, mul(Constant(1.12837916709551257f), Apply(FormulaOp::kExp, Apply(FormulaOp::kNeg, mul(a, a))))));
        break;
      case FormulaOp::kMin:
      case FormulaOp::kMax: {
        // The gradient goes to the operand chosen (the first where they are equal).
        const int first = Apply(node.op == FormulaOp::kMin ? FormulaOp::kLessEqual : FormulaOp::kGreaterEqual, a, b);
        add_to(a, Apply(FormulaOp::kWhere, first, g, zero));
        add_to(b, Apply(FormulaOp::kWhere, first, zero, g));
        break;
      }
      case FormulaOp::kWhere:
        add_to(b, Apply(FormulaOp::kWhere, a, g, zero));
        add_to(c, Apply(FormulaOp::kWhere, a, zero, g));
        break;
      case FormulaOp::kReduceSum:
        add_to(a, g);  // the same along the reduced axes
        break;
      case FormulaOp::kReduceMax:
      case FormulaOp::kReduceMin:
        // To every element equal to the extreme (each of them where several are).
        add_to(a, Apply(FormulaOp::kWhere, Apply(FormulaOp::kEqual, a, n), g, zero));
        break;
      default:  // constants, comparisons and sign: no gradient
        break;
    }
  }
  return gradients;
}

int FormulaGraph::Substitute(int root, const std::map<int, int>& replace) {
  std::map<int, int> done(replace);
  // Operands have lower ids than their users: rebuilding in id order sees every operand rebuilt first.
  std::vector<bool> needed(root + 1, false);
  needed[root] = true;
  for (int n = root; n >= 0; --n) {
    if (!needed[n] || done.count(n)) continue;
    for (int operand : {nodes_[n].a, nodes_[n].b, nodes_[n].c})
      if (operand >= 0) needed[operand] = true;
  }
  for (int n = 0; n <= root; ++n) {
    if (!needed[n] || done.count(n)) continue;
    const FormulaNode node = nodes_[n];
    if (node.op == FormulaOp::kConstant || node.op == FormulaOp::kInput) {
      done[n] = n;
      continue;
    }
    const auto rebuilt = [&](int operand) { return operand < 0 ? -1 : done.at(operand); };
    done[n] = Rebuild(node, rebuilt(node.a), rebuilt(node.b), rebuilt(node.c));
  }
  return done.at(root);
}

std::vector<bool> FormulaGraph::Reachable(const std::vector<int>& roots) const {
  std::vector<bool> reached(nodes_.size(), false);
  for (int root : roots)
    if (root >= 0) reached[root] = true;
  for (int n = static_cast<int>(nodes_.size()) - 1; n >= 0; --n) {
    if (!reached[n]) continue;
    for (int operand : {nodes_[n].a, nodes_[n].b, nodes_[n].c})
      if (operand >= 0) reached[operand] = true;
  }
  return reached;
}

bool FormulaCostly(FormulaOp op) {
  switch (op) {
    case FormulaOp::kPow:
    case FormulaOp::kExp:
    case FormulaOp::kLog:
    case FormulaOp::kSqrt:
    case FormulaOp::kTanh:
    case FormulaOp::kSigmoid:
    case FormulaOp::kSoftplus:
    case FormulaOp::kErf:
    case FormulaOp::kReduceSum:
    case FormulaOp::kReduceMax:
    case FormulaOp::kReduceMin:
      return true;
    default:
      return false;
  }
}

std::string FormulaGraph::Describe(int n) const { return Describe(n, input_names_); }

std::string FormulaGraph::Describe(int n, const std::vector<std::string>& names) const {
  const FormulaNode& node = nodes_[n];
  std::ostringstream out;
  const auto infix = [&](const char* op) {
    out << "(" << Describe(node.a, names) << " " << op << " " << Describe(node.b, names) << ")";
  };
  switch (node.op) {
    case FormulaOp::kConstant: {
      // Digits enough to read back the same float.
      char text[32];
      std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(node.value));
      out << text;
      break;
    }
    case FormulaOp::kInput:
      out << names[node.input];
      break;
    case FormulaOp::kAdd:
      infix("+");
      break;
    case FormulaOp::kSub:
      infix("-");
      break;
    case FormulaOp::kMul:
      infix("*");
      break;
    case FormulaOp::kDiv:
      infix("/");
      break;
    case FormulaOp::kPow:
      infix("^");
      break;
    case FormulaOp::kLess:
      infix("<");
      break;
    case FormulaOp::kLessEqual:
      infix("<=");
      break;
    case FormulaOp::kGreater:
      infix(">");
      break;
    case FormulaOp::kGreaterEqual:
      infix(">=");
      break;
    case FormulaOp::kEqual:
      infix("==");
      break;
    case FormulaOp::kNotEqual:
      infix("!=");
      break;
    case FormulaOp::kNeg:
      out << "(-" << Describe(node.a, names) << ")";
      break;
    case FormulaOp::kSign:
      out << "sign(" << Describe(node.a, names) << ")";
      break;
    case FormulaOp::kReduceSum:
    case FormulaOp::kReduceMax:
    case FormulaOp::kReduceMin:
      out << (node.op == FormulaOp::kReduceSum   ? "sum"
              : node.op == FormulaOp::kReduceMax ? "max"
                                                 : "min")
          << "[" << DescribeAxes(node.reduce) << "](" << Describe(node.a, names) << ")";
      break;
    case FormulaOp::kCount:
      out << "count[" << DescribeAxes(node.reduce) << "]";
      break;
    default: {
      const char* name = "?";
      for (const FunctionInfo& f : kFunctions)
        if (f.op == node.op) name = f.name;
      out << name << "(" << Describe(node.a, names);
      if (node.b >= 0) out << ", " << Describe(node.b, names);
      if (node.c >= 0) out << ", " << Describe(node.c, names);
      out << ")";
    }
  }
  return out.str();
}

std::string FormulaGraph::DescribeAxes(AxisMask axes) const {
  std::string text;
  for (size_t a = 0; a < axis_names_.size(); ++a)
    if (axes & (AxisMask{1} << a)) text += (text.empty() ? "" : ", ") + axis_names_[a];
  return text;
}

// ---- programs -------------------------------------------------------------------------------------------------

namespace {

constexpr int64_t kChunk = 512;         // floats per register: a pass's registers stay in the L1 cache
constexpr int64_t kBlock = 8 * kChunk;  // a reduction's values are added in blocks of this many, then the blocks

// The elements begin .. begin+length-1 of a pass's iteration (sizes: its axes, outer first) read from an array whose
// element for the coordinates (i0, i1, ...) is at sum(ik * strides[k]): runs along the innermost axis at a time.
void Gather(const float* data, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t begin,
            int length, float* out) {
  const int rank = static_cast<int>(sizes.size());
  int64_t coordinate[kFormulaMostAxes];
  int64_t rest = begin, base = 0;
  for (int d = rank - 1; d >= 0; --d) {
    coordinate[d] = rest % sizes[d];
    rest /= sizes[d];
    base += coordinate[d] * strides[d];
  }
  const int inner = rank - 1;
  const int64_t step = strides[inner];
  for (int done = 0; done < length;) {
    const int run = static_cast<int>(std::min<int64_t>(length - done, sizes[inner] - coordinate[inner]));
    if (step == 0) {
      std::fill_n(out + done, run, data[base]);
    } else if (step == 1) {
      std::copy_n(data + base, run, out + done);
    } else {
      for (int k = 0; k < run; ++k) out[done + k] = data[base + k * step];
    }
    done += run;
    base += run * step;
    coordinate[inner] += run;
    for (int d = inner; d > 0 && coordinate[d] == sizes[d]; --d) {
      base += strides[d - 1] - sizes[d] * strides[d];
      coordinate[d] = 0;
      ++coordinate[d - 1];
    }
  }
}

// Adds `value` to a reduction's running result: a sum, or the largest or smallest value (NaN wins: no silent NaN).
inline void Combine(FormulaOp op, double& result, double value) {
  if (op == FormulaOp::kReduceSum) {
    result += value;
  } else if (!std::isnan(result) &&
             (std::isnan(value) || (op == FormulaOp::kReduceMax ? value > result : value < result))) {
    result = value;
  }
}

double Identity(FormulaOp op) {
  if (op == FormulaOp::kReduceMax) return -std::numeric_limits<double>::infinity();
  if (op == FormulaOp::kReduceMin) return std::numeric_limits<double>::infinity();
  return 0.0;
}

int64_t Elements(const std::vector<int64_t>& dims, AxisMask axes) {
  int64_t count = 1;
  for (size_t a = 0; a < dims.size(); ++a)
    if (axes & (AxisMask{1} << a)) count *= dims[a];
  return count;
}

// One operation over `length` elements. Built for the vector units this CPU has (AVX-512, AVX2 with FMA, else
// SSE2), chosen when the program loads: the loops and FastExp vectorise.
CREMA_VECTOR_CLONES void ElementLoop(FormulaOp op, int length, const float* a, const float* b, const float* c,
                                     float* out) {
  // A loop per operation, its element function inlined; operands an operation does not read are absent: the loop
  // reads them only where it does.
  switch (op) {
#define CREMA_FORMULA_LOOP(name)                                                                                 \
  case FormulaOp::name: {                                                                                        \
    constexpr int arity = Arity(FormulaOp::name);                                                                \
    for (int e = 0; e < length; ++e)                                                                             \
      out[e] = Element<FormulaOp::name>(arity > 0 ? a[e] : 0.f, arity > 1 ? b[e] : 0.f, arity > 2 ? c[e] : 0.f); \
    return;                                                                                                      \
  }
    CREMA_FORMULA_ELEMENT_OPS(CREMA_FORMULA_LOOP)
#undef CREMA_FORMULA_LOOP
    default:
      break;
  }
}

}  // namespace

FormulaProgram::FormulaProgram(const FormulaGraph& graph, const std::vector<Output>& outputs) : outputs_(outputs) {
  const auto& nodes = graph.nodes();
  std::vector<int> roots;
  for (const Output& output : outputs) {
    CREMA_CHECK((nodes[output.node].axes & ~output.axes) == 0)
        << "a formula output over " << graph.DescribeAxes(output.axes) << " of a value over "
        << graph.DescribeAxes(nodes[output.node].axes);
    roots.push_back(output.node);
  }
  // A pass per reduction, inner ones first (operands have lower ids), each filling a buffer later passes read.
  const std::vector<bool> needed = graph.Reachable(roots);
  std::vector<int> buffer_of(nodes.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!needed[n] || !FormulaReduces(nodes[n].op)) continue;
    Pass pass = Compile(graph, {nodes[n].a}, buffer_of);
    pass.loop = nodes[nodes[n].a].axes | nodes[n].reduce;
    pass.reduced = nodes[n].reduce;
    pass.reduce = nodes[n].op;
    pass.buffer = static_cast<int>(buffer_axes_.size());
    buffer_of[n] = pass.buffer;
    buffer_axes_.push_back(nodes[n].axes);
    passes_.push_back(std::move(pass));
  }
  // Then a pass per set of outputs over the same axes.
  std::vector<bool> placed(outputs.size(), false);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (placed[k]) continue;
    std::vector<int> group_roots, group;
    for (size_t j = k; j < outputs.size(); ++j) {
      if (placed[j] || outputs[j].axes != outputs[k].axes) continue;
      placed[j] = true;
      group_roots.push_back(outputs[j].node);
      group.push_back(static_cast<int>(j));
    }
    Pass pass = Compile(graph, group_roots, buffer_of);
    pass.loop = outputs[k].axes;
    pass.outputs = group;
    passes_.push_back(std::move(pass));
  }
}

FormulaProgram::Pass FormulaProgram::Compile(const FormulaGraph& graph, const std::vector<int>& roots,
                                             const std::vector<int>& buffer_of) const {
  // The nodes the roots need, in id order (operands first), down to the leaves: inputs, constants, counts and the
  // reductions earlier passes computed. One register each, reused once its last reader has run, so a long formula
  // needs few chunks of scratch.
  const auto& nodes = graph.nodes();
  const auto leaf = [&](int n) {
    const FormulaOp op = nodes[n].op;
    return op == FormulaOp::kInput || op == FormulaOp::kConstant || op == FormulaOp::kCount || buffer_of[n] >= 0;
  };
  int top = 0;
  for (int root : roots) top = std::max(top, root);
  std::vector<bool> needed(static_cast<size_t>(top) + 1, false);
  for (int root : roots) needed[root] = true;
  std::vector<int> last_use(needed.size(), -1);
  for (int n = top; n >= 0; --n) {
    if (!needed[n] || leaf(n)) continue;
    for (int operand : {nodes[n].a, nodes[n].b, nodes[n].c}) {
      if (operand < 0) continue;
      needed[operand] = true;
      last_use[operand] = std::max(last_use[operand], n);
    }
  }
  for (int root : roots) last_use[root] = top + 1;  // kept to the end
  Pass pass;
  std::vector<int> register_of(needed.size(), -1);
  std::vector<int> free_registers;
  std::map<std::pair<int, int>, int> leaf_of;  // (input, buffer) -> leaf
  for (int n = 0; n <= top; ++n) {
    if (!needed[n]) continue;
    const FormulaNode& node = nodes[n];
    Instruction instruction{node.op, -1, -1, -1, -1, node.value, -1, node.reduce};
    if (node.op == FormulaOp::kInput || buffer_of[n] >= 0) {
      const std::pair<int, int> key(buffer_of[n] >= 0 ? -1 : node.input, buffer_of[n]);
      if (!leaf_of.count(key)) {
        leaf_of[key] = static_cast<int>(pass.leaves.size());
        pass.leaves.push_back({key.first, key.second, node.axes});
      }
      instruction.op = FormulaOp::kInput;
      instruction.leaf = leaf_of[key];
    } else if (!leaf(n)) {
      instruction.a = node.a >= 0 ? register_of[node.a] : -1;
      instruction.b = node.b >= 0 ? register_of[node.b] : -1;
      instruction.c = node.c >= 0 ? register_of[node.c] : -1;
      // Operands read for the last time free their registers before the result takes one (an element's result may
      // overwrite its own operand: each instruction reads element i before writing element i).
      for (int operand : {node.a, node.b, node.c})
        if (operand >= 0 && last_use[operand] == n &&
            std::find(free_registers.begin(), free_registers.end(), register_of[operand]) == free_registers.end())
          free_registers.push_back(register_of[operand]);
    }
    if (free_registers.empty()) {
      instruction.out = pass.registers++;
    } else {
      instruction.out = free_registers.back();
      free_registers.pop_back();
    }
    register_of[n] = instruction.out;
    pass.code.push_back(instruction);
  }
  for (int root : roots) pass.results.push_back(register_of[root]);
  return pass;
}

int FormulaProgram::instructions() const {
  int count = 0;
  for (const Pass& pass : passes_) count += static_cast<int>(pass.code.size());
  return count;
}

void FormulaProgram::Run(const std::vector<int64_t>& dims, const std::vector<const float*>& inputs,
                         const std::vector<float*>& outputs, bool accumulate) const {
  CREMA_CHECK(outputs.size() == outputs_.size())
      << "a formula program with " << outputs_.size() << " outputs got " << outputs.size();
  std::vector<std::vector<float>> buffers(buffer_axes_.size());
  for (size_t b = 0; b < buffers.size(); ++b) buffers[b].resize(static_cast<size_t>(Elements(dims, buffer_axes_[b])));
  for (const Pass& pass : passes_) RunPass(pass, dims, inputs, buffers, outputs, accumulate);
}

namespace {

// A float as CUDA source that reads back the same bits.
std::string CudaFloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  char text[40];
  std::snprintf(text, sizeof(text), "__int_as_float(0x%08x)", bits);
  return text;
}

// One element operation in CUDA over operands named a, b, c: the CPU's Element in the device's functions.
std::string CudaElement(FormulaOp op, const std::string& a, const std::string& b, const std::string& c) {
  switch (op) {
    case FormulaOp::kAdd:
      return a + " + " + b;
    case FormulaOp::kSub:
      return a + " - " + b;
    case FormulaOp::kMul:
      return a + " * " + b;
    case FormulaOp::kDiv:
      return a + " / " + b;
    case FormulaOp::kPow:
      return "powf(" + a + ", " + b + ")";
    case FormulaOp::kNeg:
      return "-" + a;
    case FormulaOp::kExp:
      return "expf(" + a + ")";
    case FormulaOp::kLog:
      return "logf(" + a + ")";
    case FormulaOp::kSqrt:
      return "sqrtf(" + a + ")";
    case FormulaOp::kAbs:
      return "fabsf(" + a + ")";
    case FormulaOp::kTanh:
      return "tanhf(" + a + ")";
    case FormulaOp::kSigmoid:
      return "1.f / (1.f + expf(-" + a + "))";
    case FormulaOp::kRelu:
      return a + " > 0.f ? " + a + " : 0.f";
    case FormulaOp::kSoftplus:
      return "fmaxf(" + a + ", 0.f) + log1pf(expf(-fabsf(" + a + ")))";
    case FormulaOp::kErf:
      return "erff(" + a + ")";
    case FormulaOp::kMin:
      return b + " < " + a + " ? " + b + " : " + a;
    case FormulaOp::kMax:
      return a + " < " + b + " ? " + b + " : " + a;
    case FormulaOp::kLess:
      return a + " < " + b + " ? 1.f : 0.f";
    case FormulaOp::kLessEqual:
      return a + " <= " + b + " ? 1.f : 0.f";
    case FormulaOp::kGreater:
      return a + " > " + b + " ? 1.f : 0.f";
    case FormulaOp::kGreaterEqual:
      return a + " >= " + b + " ? 1.f : 0.f";
    case FormulaOp::kEqual:
      return a + " == " + b + " ? 1.f : 0.f";
    case FormulaOp::kNotEqual:
      return a + " != " + b + " ? 1.f : 0.f";
    case FormulaOp::kWhere:
      return a + " != 0.f ? " + b + " : " + c;
    case FormulaOp::kSign:
      return a + " > 0.f ? 1.f : (" + a + " < 0.f ? -1.f : 0.f)";
    default:
      return "0.f";
  }
}

}  // namespace

std::string FormulaProgram::CudaSource(const std::string& name) const {
  std::ostringstream out;
  out << "// Generated by crema (FormulaProgram::CudaSource): " << passes_.size() << " pass"
      << (passes_.size() == 1 ? "" : "es") << ".\n"
      << "struct FormulaKernelArgs {\n"
      << "  long long total, reduced, values;\n"
      << "  int rank, accumulate;\n"
      << "  long long sizes[" << kFormulaMostAxes << "];\n"
      << "  const float* leaves[" << kFormulaKernelLeaves << "];\n"
      << "  long long strides[" << kFormulaKernelLeaves << "][" << kFormulaMostAxes << "];\n"
      << "  int straight[" << kFormulaKernelLeaves << "];\n"
      << "  float* outputs[" << kFormulaKernelOutputs << "];\n"
      << "  float counts[" << kFormulaKernelCounts << "];\n"
      << "};\n"
      << "// Element j of the pass's iteration of leaf k.\n"
      << "__device__ __forceinline__ float Load(const FormulaKernelArgs& args, int k, long long j) {\n"
      << "  if (args.straight[k]) return args.leaves[k][j];\n"
      << "  long long index = 0, rest = j;\n"
      << "  for (int d = args.rank - 1; d >= 0; --d) {\n"
      << "    const long long size = args.sizes[d];\n"
      << "    index += (rest % size) * args.strides[k][d];\n"
      << "    rest /= size;\n"
      << "  }\n"
      << "  return args.leaves[k][index];\n"
      << "}\n";
  for (size_t p = 0; p < passes_.size(); ++p) {
    const Pass& pass = passes_[p];
    CREMA_CHECK(pass.leaves.size() <= static_cast<size_t>(kFormulaKernelLeaves))
        << "a formula pass reads " << pass.leaves.size() << " arrays; a kernel takes at most " << kFormulaKernelLeaves;
    CREMA_CHECK(pass.results.size() <= static_cast<size_t>(kFormulaKernelOutputs))
        << "a formula pass writes " << pass.results.size() << " arrays; a kernel at most " << kFormulaKernelOutputs;
    // The pass's code for element j, into registers r0, r1, ...
    std::ostringstream code;
    int counts = 0;
    for (const Instruction& in : pass.code) {
      const auto r = [](int k) { return "r" + std::to_string(k); };
      code << "    " << r(in.out) << " = ";
      switch (in.op) {
        case FormulaOp::kConstant:
          code << CudaFloat(in.value);
          break;
        case FormulaOp::kCount:
          CREMA_CHECK(counts < kFormulaKernelCounts)
              << "a formula pass counts more than " << kFormulaKernelCounts << " sets of axes";
          code << "args.counts[" << counts++ << "]";
          break;
        case FormulaOp::kInput:
          code << "Load(args, " << in.leaf << ", j)";
          break;
        default:
          code << CudaElement(in.op, in.a >= 0 ? r(in.a) : "", in.b >= 0 ? r(in.b) : "", in.c >= 0 ? r(in.c) : "");
      }
      code << ";\n";
    }
    std::string registers;
    for (int k = 0; k < pass.registers; ++k) registers += (k ? ", r" : "r") + std::to_string(k);
    out << "extern \"C\" __global__ void " << name << "_" << p << "(const FormulaKernelArgs args) {\n";
    if (pass.reduced == 0) {
      // Element outputs: a thread per element, striding over the grid.
      out << "  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < args.total;\n"
          << "       j += (long long)gridDim.x * blockDim.x) {\n"
          << "    float " << registers << ";\n"
          << code.str();
      for (size_t k = 0; k < pass.results.size(); ++k)
        out << "    if (args.accumulate) args.outputs[" << k << "][j] += r" << pass.results[k] << "; else args.outputs["
            << k << "][j] = r" << pass.results[k] << ";\n";
      out << "  }\n";
    } else {
      // A reduction: a block per value, its threads over the value's run in a fixed order, then a tree in shared
      // memory (the same bits every run).
      const char* combine = pass.reduce == FormulaOp::kReduceSum   ? "x + y"
                            : pass.reduce == FormulaOp::kReduceMax ? "(isnan(x) || !(y > x || isnan(y))) ? x : y"
                                                                   : "(isnan(x) || !(y < x || isnan(y))) ? x : y";
      const char* identity = pass.reduce == FormulaOp::kReduceSum   ? "0.0"
                             : pass.reduce == FormulaOp::kReduceMax ? "-CUDART_INF"
                                                                    : "CUDART_INF";
      out << "  __shared__ double partial[256];\n"
          << "  for (long long v = blockIdx.x; v < args.values; v += gridDim.x) {\n"
          << "    double running = " << identity << ";\n"
          << "    for (long long e = threadIdx.x; e < args.reduced; e += blockDim.x) {\n"
          << "      const long long j = v * args.reduced + e;\n"
          << "      float " << registers << ";\n";
      std::istringstream lines(code.str());
      for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
      out << "      const double x = running, y = r" << pass.results[0] << ";\n"
          << "      running = " << combine << ";\n"
          << "    }\n"
          << "    partial[threadIdx.x] = running;\n"
          << "    __syncthreads();\n"
          << "    for (int half = blockDim.x / 2; half > 0; half /= 2) {\n"
          << "      if (threadIdx.x < half) {\n"
          << "        const double x = partial[threadIdx.x], y = partial[threadIdx.x + half];\n"
          << "        partial[threadIdx.x] = " << combine << ";\n"
          << "      }\n"
          << "      __syncthreads();\n"
          << "    }\n"
          << "    if (threadIdx.x == 0) args.outputs[0][v] = (float)partial[0];\n"
          << "    __syncthreads();\n"
          << "  }\n";
    }
    out << "}\n";
  }
  return "#define CUDART_INF __longlong_as_double(0x7ff0000000000000ULL)\n" + out.str();
}

FormulaProgram::Layout FormulaProgram::PassLayout(const Pass& pass, const std::vector<int64_t>& dims) const {
  // The iteration: the pass's axes of more than one element, those it keeps outer and those it reduces inner, each
  // in axis order; element j of the iteration is element j of an output (or of the reduction's values, an output's
  // run of `reduced` consecutive elements).
  Layout layout;
  std::vector<int> order;
  for (int inner = 0; inner < 2; ++inner)
    for (size_t a = 0; a < dims.size(); ++a) {
      const AxisMask bit = AxisMask{1} << a;
      if ((pass.loop & bit) && ((pass.reduced & bit) != 0) == (inner == 1) && dims[a] != 1)
        order.push_back(static_cast<int>(a));
    }
  for (int a : order) layout.sizes.push_back(dims[a]);
  layout.total = Elements(dims, pass.loop);
  layout.reduced = Elements(dims, pass.reduced);
  // Per leaf, the step in its values along each axis of the iteration (0 along the axes it is broadcast over); read
  // straight where that is the iteration's own layout, gathered where not.
  for (const Leaf& leaf : pass.leaves) {
    std::vector<int64_t> own(dims.size(), 0), strides(order.size(), 0);
    int64_t stride = 1;
    for (int a = static_cast<int>(dims.size()) - 1; a >= 0; --a)
      if (leaf.axes & (AxisMask{1} << a)) {
        own[a] = stride;
        stride *= dims[a];
      }
    bool straight = true;
    int64_t iteration_stride = 1;
    for (int d = static_cast<int>(order.size()) - 1; d >= 0; --d) {
      strides[d] = own[order[d]];
      straight = straight && strides[d] == iteration_stride;
      iteration_stride *= layout.sizes[d];
    }
    layout.strides.push_back(std::move(strides));
    layout.straight.push_back(straight);
  }
  // Constants, with the counts of this run's sizes.
  for (const Instruction& in : pass.code)
    layout.values.push_back(in.op == FormulaOp::kCount ? static_cast<float>(Elements(dims, in.count)) : in.value);
  return layout;
}

void FormulaProgram::RunPass(const Pass& pass, const std::vector<int64_t>& dims,
                             const std::vector<const float*>& inputs, std::vector<std::vector<float>>& buffers,
                             const std::vector<float*>& outputs, bool accumulate) const {
  const Layout layout = PassLayout(pass, dims);
  const std::vector<int64_t>& sizes = layout.sizes;
  const int64_t total = layout.total, reduced = layout.reduced;
  std::vector<const float*> data;
  for (const Leaf& leaf : pass.leaves) {
    if (leaf.buffer >= 0) {
      data.push_back(buffers[leaf.buffer].data());
    } else {
      CREMA_CHECK(leaf.input < static_cast<int>(inputs.size()) && inputs[leaf.input] != nullptr)
          << "formula input " << leaf.input << " was not given";
      data.push_back(inputs[leaf.input]);
    }
  }
  const std::vector<float>& values = layout.values;
  // Computes the iteration's elements begin .. begin+length-1 into `scratch`'s registers.
  const auto evaluate = [&](int64_t begin, int length, float* scratch) {
    for (size_t i = 0; i < pass.code.size(); ++i) {
      const Instruction& in = pass.code[i];
      float* out = scratch + static_cast<size_t>(in.out) * kChunk;
      const float* a = in.a >= 0 ? scratch + static_cast<size_t>(in.a) * kChunk : nullptr;
      const float* b = in.b >= 0 ? scratch + static_cast<size_t>(in.b) * kChunk : nullptr;
      const float* c = in.c >= 0 ? scratch + static_cast<size_t>(in.c) * kChunk : nullptr;
      switch (in.op) {
        case FormulaOp::kConstant:
        case FormulaOp::kCount:
          std::fill_n(out, length, values[i]);
          break;
        case FormulaOp::kInput: {
          if (layout.straight[in.leaf]) {
            std::copy_n(data[in.leaf] + begin, length, out);
          } else {
            Gather(data[in.leaf], sizes, layout.strides[in.leaf], begin, length, out);
          }
          break;
        }
        default:
          ElementLoop(in.op, length, a, b, c, out);
      }
    }
  };
  const size_t scratch_size = static_cast<size_t>(std::max(pass.registers, 1)) * kChunk;
  if (pass.reduced == 0) {
    // Element outputs, chunk by chunk.
    const int64_t chunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel if (total >= 4 * kChunk)
    {
      std::vector<float> scratch(scratch_size);
#pragma omp for schedule(static)
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        const int64_t begin = chunk * kChunk;
        const int length = static_cast<int>(std::min(kChunk, total - begin));
        evaluate(begin, length, scratch.data());
        for (size_t r = 0; r < pass.results.size(); ++r) {
          const float* result = scratch.data() + static_cast<size_t>(pass.results[r]) * kChunk;
          float* target = outputs[pass.outputs[r]] + begin;
          if (accumulate) {
            for (int e = 0; e < length; ++e) target[e] += result[e];
          } else {
            std::copy_n(result, length, target);
          }
        }
      }
    }
    return;
  }
  // A reduction. Each of its values is the reduction of a run of `reduced` consecutive elements of the iteration,
  // taken in blocks of kBlock elements: where the runs are long, a task per block of a run and the blocks combined in
  // order; where short, a task per kBlock / reduced whole runs. Tasks are fixed by the sizes alone: the same bits on
  // any number of threads.
  std::vector<float>& buffer = buffers[pass.buffer];
  const int64_t values_count = static_cast<int64_t>(buffer.size());
  if (reduced == 0 || total == 0) {
    std::fill(buffer.begin(), buffer.end(), static_cast<float>(Identity(pass.reduce)));
    return;
  }
  const int64_t blocks_per_value = reduced >= kBlock ? (reduced + kBlock - 1) / kBlock : 1;
  const int64_t values_per_task = reduced >= kBlock ? 1 : std::max<int64_t>(1, kBlock / reduced);
  const int64_t tasks =
      reduced >= kBlock ? values_count * blocks_per_value : (values_count + values_per_task - 1) / values_per_task;
  std::vector<double> partial(reduced >= kBlock ? static_cast<size_t>(tasks) : 0);
  const int result_register = pass.results[0];
#pragma omp parallel if (total >= 4 * kChunk)
  {
    std::vector<float> scratch(scratch_size);
    std::vector<double> running(static_cast<size_t>(values_per_task));
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      int64_t begin, end, first_value;
      if (reduced >= kBlock) {
        first_value = task / blocks_per_value;
        const int64_t block = task % blocks_per_value;
        begin = first_value * reduced + block * kBlock;
        end = first_value * reduced + std::min(reduced, (block + 1) * kBlock);
      } else {
        first_value = task * values_per_task;
        begin = first_value * reduced;
        end = std::min(values_count, first_value + values_per_task) * reduced;
      }
      std::fill(running.begin(), running.end(), Identity(pass.reduce));
      for (int64_t at = begin; at < end; at += kChunk) {
        const int length = static_cast<int>(std::min(kChunk, end - at));
        evaluate(at, length, scratch.data());
        const float* result = scratch.data() + static_cast<size_t>(result_register) * kChunk;
        for (int e = 0; e < length;) {
          const int64_t value = (at + e) / reduced;
          const int run_end = static_cast<int>(std::min<int64_t>(length, (value + 1) * reduced - at));
          double& into = running[static_cast<size_t>(value - first_value)];
          for (; e < run_end; ++e) Combine(pass.reduce, into, result[e]);
        }
      }
      if (reduced >= kBlock) {
        partial[static_cast<size_t>(task)] = running[0];
      } else {
        for (int64_t v = first_value; v < std::min(values_count, first_value + values_per_task); ++v)
          buffer[static_cast<size_t>(v)] = static_cast<float>(running[static_cast<size_t>(v - first_value)]);
      }
    }
  }
  if (reduced >= kBlock) {
    for (int64_t v = 0; v < values_count; ++v) {
      double result = Identity(pass.reduce);
      for (int64_t block = 0; block < blocks_per_value; ++block)
        Combine(pass.reduce, result, partial[static_cast<size_t>(v * blocks_per_value + block)]);
      buffer[static_cast<size_t>(v)] = static_cast<float>(result);
    }
  }
}

}  // namespace crema
