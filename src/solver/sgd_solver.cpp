#include "solver/sgd_solver.hpp"

#include "core/elementwise.hpp"

namespace crema {

SGDSolver::SGDSolver(const SolverParameter& param, const std::string& solver_path) : Solver(param, solver_path) {}

void SGDSolver::ComputeUpdateValue(int param_index, float rate) {
  Blob* param = net()->learnable_params()[param_index];
  const float local_rate = rate * net()->params_lr()[param_index];
  const float momentum = this->param().momentum();
  float* velocity = history_[param_index]->mutable_cpu_data();
  float* diff = param->mutable_cpu_diff();
  for_each_element(param->count(), [=](int i) {
    velocity[i] = momentum * velocity[i] + local_rate * diff[i];
    diff[i] = velocity[i];
  });
}

}  // namespace crema
