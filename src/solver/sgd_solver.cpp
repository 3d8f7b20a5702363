#include "solver/sgd_solver.hpp"

#include "solver/update_rules.hpp"

namespace crema {

SGDSolver::SGDSolver(const SolverParameter& param, const std::string& solver_path, std::shared_ptr<Context> context)
    : Solver(param, solver_path, std::move(context)) {}

void SGDSolver::ComputeUpdateValue(int param_index, float rate) {
  Blob* param = net()->learnable_params()[param_index];
  const Device device = context().device();
  for_each_element(context(), param->count(),
                   SgdMomentum{history_[param_index]->mutable_data_on(device), param->mutable_diff_on(device),
                               this->param().momentum(), rate * net()->params_lr()[param_index]});
}

}  // namespace crema
