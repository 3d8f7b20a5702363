// Stochastic gradient descent with momentum: v = momentum * v + rate * grad; w -= v.
#pragma once

#include "solver/solver.hpp"

namespace crema {

class SGDSolver : public Solver {
 public:
  explicit SGDSolver(const SolverParameter& param, const std::string& solver_path = "",
                     std::shared_ptr<Context> context = nullptr);
  const char* type() const override { return "SGD"; }

 protected:
  std::unique_ptr<UpdateRule> UpdateRuleFor(int param_index, float rate) override;
};

}  // namespace crema
