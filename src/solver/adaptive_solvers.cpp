#include "solver/adaptive_solvers.hpp"

#include <cmath>

#include "solver/update_rules.hpp"

namespace crema {

namespace {

// AdaGrad and RMSProp have no momentum term; Caffe refuses one rather than ignore it, and so do we.
void RequireNoMomentum(const SolverParameter& param, const char* type) {
  CREMA_CHECK(param.momentum() == 0.f) << "the " << type << " solver has no momentum term, but the solver sets "
                                       << "momentum: " << param.momentum() << "; remove it";
}

// A decay rate outside [0, 1) makes a running mean grow without bound or turn negative (then its square root
// is NaN); Adam's bias correction also divides by 1 - decay^t.
void RequireDecay(const char* type, const char* field, float value) {
  CREMA_CHECK(value >= 0.f && value < 1.f)
      << "the " << type << " solver needs " << field << " in [0, 1), got " << value;
}

// delta keeps the denominator away from zero: with delta 0, a parameter whose gradient has always been zero
// would be updated by 0 / 0.
void RequirePositiveDelta(const SolverParameter& param, const char* type) {
  CREMA_CHECK(param.delta() > 0.f) << "the " << type << " solver needs delta above 0, got " << param.delta();
}

// Each rule's checks, which Solver runs after the nets' and the shared settings' and before it builds the nets:
// a wrong setting is reported at once, not after a data set was opened.
void CheckNesterov(const SolverParameter& param) { RequireDecay("Nesterov", "momentum", param.momentum()); }

void CheckAdaGrad(const SolverParameter& param) {
  RequireNoMomentum(param, "AdaGrad");
  RequirePositiveDelta(param, "AdaGrad");
}

void CheckRMSProp(const SolverParameter& param) {
  RequireNoMomentum(param, "RMSProp");
  RequireDecay("RMSProp", "rms_decay", param.rms_decay());
  RequirePositiveDelta(param, "RMSProp");
}

void CheckAdaDelta(const SolverParameter& param) {
  RequireDecay("AdaDelta", "momentum", param.momentum());
  RequirePositiveDelta(param, "AdaDelta");
}

void CheckAdam(const SolverParameter& param) {
  RequireDecay("Adam", "momentum", param.momentum());
  RequireDecay("Adam", "momentum2", param.momentum2());
  RequirePositiveDelta(param, "Adam");
}

}  // namespace

NesterovSolver::NesterovSolver(const SolverParameter& param, const std::string& solver_path,
                               std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/1, CheckNesterov) {}

std::unique_ptr<UpdateRule> NesterovSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  return MakeUpdateRule(NesterovUpdate{op.history, op.diff, param().momentum(), op.local_rate});
}

AdaGradSolver::AdaGradSolver(const SolverParameter& param, const std::string& solver_path,
                             std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/1, CheckAdaGrad) {}

std::unique_ptr<UpdateRule> AdaGradSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  return MakeUpdateRule(AdaGradUpdate{op.history, op.diff, param().delta(), op.local_rate});
}

RMSPropSolver::RMSPropSolver(const SolverParameter& param, const std::string& solver_path,
                             std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/1, CheckRMSProp) {}

std::unique_ptr<UpdateRule> RMSPropSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  return MakeUpdateRule(RMSPropUpdate{op.history, op.diff, param().rms_decay(), param().delta(), op.local_rate});
}

AdaDeltaSolver::AdaDeltaSolver(const SolverParameter& param, const std::string& solver_path,
                               std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/2, CheckAdaDelta) {}

std::unique_ptr<UpdateRule> AdaDeltaSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  return MakeUpdateRule(
      AdaDeltaUpdate{op.history, op.history2, op.diff, param().momentum(), param().delta(), op.local_rate});
}

AdamSolver::AdamSolver(const SolverParameter& param, const std::string& solver_path, std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context), /*history_sets=*/2, CheckAdam) {}

std::unique_ptr<UpdateRule> AdamSolver::UpdateRuleFor(int param_index, float rate) {
  const UpdateOperands op = OperandsFor(param_index, rate);
  const float beta1 = param().momentum(), beta2 = param().momentum2();
  // Both running means start at zero and so are biased towards it early on; t counts from 1.
  const double t = iter() + 1.0;
  const double correction = std::sqrt(1.0 - std::pow(double{beta2}, t)) / (1.0 - std::pow(double{beta1}, t));
  return MakeUpdateRule(AdamUpdate{op.history, op.history2, op.diff, beta1, beta2, param().delta(),
                              static_cast<float>(op.local_rate * correction)});
}

}  // namespace crema
