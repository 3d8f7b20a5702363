#include "core/formula.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "core/common.hpp"

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

// One element of an operation, as the program and constant folding compute it: one definition per operation.
template <FormulaOp kOp>
inline float Element(float a, float b, float c) {
  if constexpr (kOp == FormulaOp::kAdd) return a + b;
  if constexpr (kOp == FormulaOp::kSub) return a - b;
  if constexpr (kOp == FormulaOp::kMul) return a * b;
  if constexpr (kOp == FormulaOp::kDiv) return a / b;
  if constexpr (kOp == FormulaOp::kPow) return std::pow(a, b);
  if constexpr (kOp == FormulaOp::kNeg) return -a;
  if constexpr (kOp == FormulaOp::kExp) return std::exp(a);
  if constexpr (kOp == FormulaOp::kLog) return std::log(a);
  if constexpr (kOp == FormulaOp::kSqrt) return std::sqrt(a);
  if constexpr (kOp == FormulaOp::kAbs) return std::fabs(a);
  if constexpr (kOp == FormulaOp::kTanh) return std::tanh(a);
  if constexpr (kOp == FormulaOp::kSigmoid) return 1.f / (1.f + std::exp(-a));
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

// Calls `f(std::integral_constant<FormulaOp, op>{})` for the operation `op` names at run time, so that `f` sees it
// as a constant (one loop per operation, each with its element function inlined).
template <typename F>
auto Dispatch(FormulaOp op, F&& f) {
  using O = FormulaOp;
  switch (op) {
#define CREMA_FORMULA_CASE(name) \
  case O::name:                  \
    return f(std::integral_constant<O, O::name>{});
    CREMA_FORMULA_CASE(kAdd)
    CREMA_FORMULA_CASE(kSub)
    CREMA_FORMULA_CASE(kMul)
    CREMA_FORMULA_CASE(kDiv)
    CREMA_FORMULA_CASE(kPow)
    CREMA_FORMULA_CASE(kNeg)
    CREMA_FORMULA_CASE(kExp)
    CREMA_FORMULA_CASE(kLog)
    CREMA_FORMULA_CASE(kSqrt)
    CREMA_FORMULA_CASE(kAbs)
    CREMA_FORMULA_CASE(kTanh)
    CREMA_FORMULA_CASE(kSigmoid)
    CREMA_FORMULA_CASE(kRelu)
    CREMA_FORMULA_CASE(kSoftplus)
    CREMA_FORMULA_CASE(kErf)
    CREMA_FORMULA_CASE(kMin)
    CREMA_FORMULA_CASE(kMax)
    CREMA_FORMULA_CASE(kLess)
    CREMA_FORMULA_CASE(kLessEqual)
    CREMA_FORMULA_CASE(kGreater)
    CREMA_FORMULA_CASE(kGreaterEqual)
    CREMA_FORMULA_CASE(kEqual)
    CREMA_FORMULA_CASE(kNotEqual)
    CREMA_FORMULA_CASE(kWhere)
    CREMA_FORMULA_CASE(kSign)
#undef CREMA_FORMULA_CASE
    case O::kConstant:
    case O::kInput:
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
      return 0;
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
//   primary    := number | name | `name` | function "(" comparison {"," comparison} ")" | "(" comparison ")"
class Parser {
 public:
  Parser(FormulaGraph* graph, const std::string& text) : graph_(graph), text_(text) {}

  FormulaGraph::Parsed ParseWhole() {
    FormulaGraph::Parsed parsed;
    Skip();
    // A reduction of the whole formula: sum(...) or mean(...) with nothing after it.
    for (const auto& [name, reduction] :
         {std::pair<const char*, FormulaReduction>{"sum", FormulaReduction::kSum}, {"mean", FormulaReduction::kMean}}) {
      const size_t length = std::strlen(name);
      if (text_.compare(pos_, length, name) != 0) continue;
      size_t after = pos_ + length;
      while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after]))) ++after;
      if (after >= text_.size() || text_[after] != '(') continue;
      pos_ = after + 1;
      parsed.reduction = reduction;
      parsed.node = Comparison();
      Expect(')', std::string("to close ") + name + "(");
      break;
    }
    if (parsed.reduction == FormulaReduction::kNone) parsed.node = Comparison();
    Skip();
    if (pos_ < text_.size()) Fail("unexpected '" + std::string(1, text_[pos_]) + "' after a complete formula");
    return parsed;
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
      if (pos_ < text_.size() && text_[pos_] == '(') return Call(name, at);
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
  int Call(const std::string& name, size_t at) {
    const FunctionInfo* function = nullptr;
    for (const FunctionInfo& f : kFunctions)
      if (name == f.name) function = &f;
    if (function == nullptr) {
      pos_ = at;
      if (name == "sum" || name == "mean")
        Fail(name + "(...) may only be the whole formula (a reduction of every element)");
      std::string known;
      for (const std::string& f : FormulaFunctions()) known += (known.empty() ? "" : ", ") + f;
      Fail("unknown function '" + name + "' (known: " + known + ")");
    }
    Expect('(', "");
    std::vector<int> arguments{Comparison()};
    while (Accept(",")) arguments.push_back(Comparison());
    if (static_cast<int>(arguments.size()) != function->arguments) {
      pos_ = at;
      Fail(name + " takes " + std::to_string(function->arguments) + " argument" +
           (function->arguments == 1 ? "" : "s") + ", got " + std::to_string(arguments.size()));
    }
    Expect(')', "to close " + name + "(");
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

FormulaGraph::Parsed FormulaGraph::Parse(const std::string& text) { return Parser(this, text).ParseWhole(); }

int FormulaGraph::Add(const FormulaNode& node) {
  const auto key = std::make_tuple(static_cast<int>(node.op), node.a, node.b, node.c, Bits(node.value), node.input);
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
  node.varies = true;
  return Add(node);
}

int FormulaGraph::AddInput(const std::string& name) {
  input_names_.push_back(name);
  return Input(static_cast<int>(input_names_.size()) - 1);
}

int FormulaGraph::Apply(FormulaOp op, int a, int b, int c) {
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
    done[n] = Apply(node.op, rebuilt(node.a), rebuilt(node.b), rebuilt(node.c));
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
      return true;
    default:
      return false;
  }
}

std::string FormulaGraph::Describe(int n) const {
  const FormulaNode& node = nodes_[n];
  std::ostringstream out;
  const auto infix = [&](const char* op) {
    out << "(" << Describe(node.a) << " " << op << " " << Describe(node.b) << ")";
  };
  switch (node.op) {
    case FormulaOp::kConstant:
      out << node.value;
      break;
    case FormulaOp::kInput:
      out << input_names_[node.input];
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
      out << "-" << Describe(node.a);
      break;
    case FormulaOp::kSign:
      out << "sign(" << Describe(node.a) << ")";
      break;
    default: {
      const char* name = "?";
      for (const FunctionInfo& f : kFunctions)
        if (f.op == node.op) name = f.name;
      out << name << "(" << Describe(node.a);
      if (node.b >= 0) out << ", " << Describe(node.b);
      if (node.c >= 0) out << ", " << Describe(node.c);
      out << ")";
    }
  }
  return out.str();
}

FormulaProgram::FormulaProgram(const FormulaGraph& graph, const std::vector<Output>& outputs) : outputs_(outputs) {
  // The nodes the outputs need, in id order (operands first); one register each. Registers are reused once their
  // last reader has run, so a long formula needs few chunks of scratch.
  const auto& nodes = graph.nodes();
  std::vector<int> roots;
  for (const Output& output : outputs) roots.push_back(output.node);
  const std::vector<bool> needed = graph.Reachable(roots);
  std::vector<int> last_use(nodes.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!needed[n]) continue;
    for (int operand : {nodes[n].a, nodes[n].b, nodes[n].c})
      if (operand >= 0) last_use[operand] = static_cast<int>(n);
  }
  for (const Output& output : outputs) last_use[output.node] = static_cast<int>(nodes.size());  // kept to the end
  std::vector<int> register_of(nodes.size(), -1);
  std::vector<int> free_registers;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!needed[n]) continue;
    const FormulaNode& node = nodes[n];
    Instruction instruction{node.op, -1, -1, -1, -1, node.value, node.input};
    instruction.a = node.a >= 0 ? register_of[node.a] : -1;
    instruction.b = node.b >= 0 ? register_of[node.b] : -1;
    instruction.c = node.c >= 0 ? register_of[node.c] : -1;
    // Operands read for the last time free their registers before the result takes one (an element's result may
    // overwrite its own operand: each instruction reads element i before writing element i).
    for (int operand : {node.a, node.b, node.c})
      if (operand >= 0 && last_use[operand] == static_cast<int>(n) &&
          std::find(free_registers.begin(), free_registers.end(), register_of[operand]) == free_registers.end())
        free_registers.push_back(register_of[operand]);
    if (free_registers.empty()) {
      instruction.out = registers_++;
    } else {
      instruction.out = free_registers.back();
      free_registers.pop_back();
    }
    register_of[n] = instruction.out;
    code_.push_back(instruction);
  }
  for (const Output& output : outputs) output_registers_.push_back(register_of[output.node]);
}

void FormulaProgram::Run(int64_t count, const std::vector<InputArray>& inputs, const std::vector<float*>& outputs,
                         std::vector<double>* sums, bool accumulate) const {
  constexpr int64_t kChunk = 512;  // floats per register: a program's registers stay in the L1 cache
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  const size_t output_count = outputs_.size();
  // Per chunk and summed output: the chunk's sum, added in chunk order at the end.
  std::vector<double> partial(static_cast<size_t>(chunks) * output_count, 0.0);
  bool any_sum = false;
  for (const Output& output : outputs_) any_sum = any_sum || output.sum;
#pragma omp parallel if (count >= 4 * kChunk)
  {
    std::vector<float> scratch(static_cast<size_t>(std::max(registers_, 1)) * kChunk);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t begin = chunk * kChunk;
      const int length = static_cast<int>(std::min(kChunk, count - begin));
      for (const Instruction& in : code_) {
        float* out = scratch.data() + static_cast<size_t>(in.out) * kChunk;
        const float* a = in.a >= 0 ? scratch.data() + static_cast<size_t>(in.a) * kChunk : nullptr;
        const float* b = in.b >= 0 ? scratch.data() + static_cast<size_t>(in.b) * kChunk : nullptr;
        const float* c = in.c >= 0 ? scratch.data() + static_cast<size_t>(in.c) * kChunk : nullptr;
        switch (in.op) {
          case FormulaOp::kConstant:
            std::fill(out, out + length, in.value);
            break;
          case FormulaOp::kInput: {
            const InputArray& source = inputs[in.input];
            CREMA_CHECK(source.data != nullptr) << "formula input " << in.input << " was not given";
            if (source.broadcast) {
              std::fill(out, out + length, source.data[0]);
            } else {
              std::copy(source.data + begin, source.data + begin + length, out);
            }
            break;
          }
          default:
            // Operands an operation does not read are absent: the loop reads them only where it does.
            Dispatch(in.op, [&](auto k) {
              constexpr FormulaOp kOp = decltype(k)::value;
              constexpr int arity = Arity(kOp);
              for (int i = 0; i < length; ++i)
                out[i] = Element<kOp>(arity > 0 ? a[i] : 0.f, arity > 1 ? b[i] : 0.f, arity > 2 ? c[i] : 0.f);
              return 0;
            });
        }
      }
      for (size_t k = 0; k < output_count; ++k) {
        const float* result = scratch.data() + static_cast<size_t>(output_registers_[k]) * kChunk;
        if (outputs_[k].sum) {
          double sum = 0;
          for (int i = 0; i < length; ++i) sum += result[i];
          partial[static_cast<size_t>(chunk) * output_count + k] = sum;
        } else if (accumulate) {
          float* target = outputs[k] + begin;
          for (int i = 0; i < length; ++i) target[i] += result[i];
        } else {
          std::copy(result, result + length, outputs[k] + begin);
        }
      }
    }
  }
  if (any_sum) {
    CREMA_CHECK(sums != nullptr && sums->size() == output_count)
        << "a formula program's sums need one entry per output";
    for (size_t k = 0; k < output_count; ++k) {
      if (!outputs_[k].sum) continue;
      double total = 0;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partial[static_cast<size_t>(chunk) * output_count + k];
      (*sums)[k] = total;
    }
  }
}

}  // namespace crema
