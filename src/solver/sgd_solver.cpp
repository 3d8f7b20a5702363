#include "solver/sgd_solver.hpp"

#include "solver/update_rules.hpp"

namespace crema {

namespace {

// The velocity keeps momentum times itself each iteration: a negative momentum flips its sign every step, and
// one of 1 or more never lets a past gradient fade, so the steps grow without bound.
void CheckMomentum(const SolverParameter& param) {
  CREMA_CHECK(param.momentum() >= 0.f && param.momentum() < 1.f)
      << "the SGD solver needs momentum in [0, 1), got " << param.momentum();
}

}  // namespace

SGDSolver::SGDSolver(const SolverParameter& param, const std::string& solver_path, std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/1, CheckMomentum) {}

std::unique_ptr<UpdateRule> SGDSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  return MakeUpdateRule(SgdMomentum{op.history, op.diff, param().momentum(), op.local_rate});
}

}  // namespace crema
