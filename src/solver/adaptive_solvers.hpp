// The update rules beyond SGD, each with Caffe's name, parameters and history layout (docs/solvers.md has the
// formulas). Each is a per-element rule in update_rules.hpp run over every learnable parameter; the loop,
// clipping, normalisation, regularisation and snapshots are Solver's.
//
//   Nesterov  momentum                     history: velocity
//   AdaGrad   delta (no momentum)          history: sum of squared gradients
//   RMSProp   rms_decay, delta (no momentum) history: mean squared gradient
//   AdaDelta  momentum (the decay), delta  history: mean squared gradient, then mean squared update
//   Adam      momentum (beta1), momentum2 (beta2), delta (epsilon)
//                                          history: mean gradient, then mean squared gradient
//
// Settings that would make a rule divide by zero or ignore a field silently are refused when the solver is made,
// before its nets are built.
#pragma once

#include "solver/solver.hpp"

namespace crema {

class NesterovSolver : public Solver {
 public:
  explicit NesterovSolver(const SolverParameter& param, const std::string& solver_path = "",
                          std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "Nesterov"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

class AdaGradSolver : public Solver {
 public:
  explicit AdaGradSolver(const SolverParameter& param, const std::string& solver_path = "",
                         std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "AdaGrad"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

class RMSPropSolver : public Solver {
 public:
  explicit RMSPropSolver(const SolverParameter& param, const std::string& solver_path = "",
                         std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "RMSProp"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

class AdaDeltaSolver : public Solver {
 public:
  explicit AdaDeltaSolver(const SolverParameter& param, const std::string& solver_path = "",
                          std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "AdaDelta"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

class AdamSolver : public Solver {
 public:
  explicit AdamSolver(const SolverParameter& param, const std::string& solver_path = "",
                      std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "Adam"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

}  // namespace crema
