#include "solver/lr_policy.hpp"

#include <cmath>

namespace crema {

std::vector<std::string> KnownLearningRatePolicies() {
  return {"fixed", "step", "exp", "inv", "multistep", "poly", "sigmoid"};
}

void CheckLearningRatePolicy(const SolverParameter& param) {
  const std::string& policy = param.lr_policy();
  CREMA_CHECK(param.has_lr_policy()) << "the solver sets no lr_policy; choose one of fixed, step, exp, inv, "
                                        "multistep, poly, sigmoid";
  if (policy == "fixed" || policy == "exp") return;
  if (policy == "step" || policy == "sigmoid") {
    CREMA_CHECK(param.stepsize() > 0) << "lr_policy \"" << policy << "\" needs a positive stepsize, got "
                                      << param.stepsize();
    return;
  }
  if (policy == "inv" || policy == "poly") return;
  if (policy == "multistep") {
    CREMA_CHECK(param.stepvalue_size() > 0) << "lr_policy \"multistep\" needs at least one stepvalue";
    for (int i = 1; i < param.stepvalue_size(); ++i)
      CREMA_CHECK(param.stepvalue(i) > param.stepvalue(i - 1))
          << "lr_policy \"multistep\": stepvalue must increase, but " << param.stepvalue(i) << " follows "
          << param.stepvalue(i - 1);
    return;
  }
  std::string known;
  for (const auto& name : KnownLearningRatePolicies()) known += (known.empty() ? "" : ", ") + name;
  CREMA_FAIL() << "unknown lr_policy \"" << policy << "\"; known policies: " << known;
}

float LearningRate(const SolverParameter& param, int iter, int* current_step) {
  const std::string& policy = param.lr_policy();
  const double base = param.base_lr();
  const double gamma = param.gamma();
  if (policy == "fixed") return static_cast<float>(base);
  if (policy == "step") return static_cast<float>(base * std::pow(gamma, iter / param.stepsize()));
  if (policy == "exp") return static_cast<float>(base * std::pow(gamma, iter));
  if (policy == "inv") return static_cast<float>(base * std::pow(1.0 + gamma * iter, -param.power()));
  if (policy == "multistep") {
    while (*current_step < param.stepvalue_size() && iter >= param.stepvalue(*current_step)) ++*current_step;
    return static_cast<float>(base * std::pow(gamma, *current_step));
  }
  if (policy == "poly") {
    CREMA_CHECK(param.max_iter() > 0) << "lr_policy \"poly\" needs a positive max_iter";
    return static_cast<float>(base * std::pow(1.0 - static_cast<double>(iter) / param.max_iter(), param.power()));
  }
  if (policy == "sigmoid")
    return static_cast<float>(base / (1.0 + std::exp(-gamma * (iter - static_cast<double>(param.stepsize())))));
  CheckLearningRatePolicy(param);  // throws naming the policy
  return 0.f;
}

}  // namespace crema
