#include "solver/sgd_solver.hpp"

#include "solver/update_rules.hpp"

namespace crema {

SGDSolver::SGDSolver(const SolverParameter& param, const std::string& solver_path, std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context)) {}

void SGDSolver::ComputeUpdateValue(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  for_each_element(context(), op.count, SgdMomentum{op.history, op.diff, param().momentum(), op.local_rate});
}

}  // namespace crema
