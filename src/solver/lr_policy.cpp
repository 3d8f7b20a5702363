#include "solver/lr_policy.hpp"

#include <glog/logging.h>

#include <cmath>

namespace crema {

std::vector<std::string> KnownLearningRatePolicies() {
  return {"fixed", "step", "exp", "inv", "multistep", "poly", "sigmoid"};
}

void CheckLearningRatePolicy(const SolverParameter& param) {
  const std::string& policy = param.lr_policy();
  CREMA_CHECK(param.has_lr_policy()) << "the solver sets no lr_policy; choose one of fixed, step, exp, inv, "
                                        "multistep, poly, sigmoid";
  // gamma multiplies the rate at each step: 0 (its default) drops it to 0 for good at the first step, a negative
  // one flips its sign.
  const auto require_factor = [&] {
    CREMA_CHECK(std::isfinite(param.gamma()) && param.gamma() > 0)
        << "lr_policy \"" << policy << "\" needs gamma above 0 (the factor the rate is multiplied by"
        << (policy == "exp" ? " at each iteration" : " at each step") << ", e.g. 0.1), got " << param.gamma();
  };
  if (policy == "fixed") return;
  if (policy == "exp") {
    require_factor();
    return;
  }
  if (policy == "step" || policy == "sigmoid") {
    CREMA_CHECK(param.stepsize() > 0) << "lr_policy \"" << policy << "\" needs a positive stepsize, got "
                                      << param.stepsize();
    if (policy == "step") require_factor();
    if (policy == "sigmoid" && param.gamma() == 0)
      LOG(WARNING) << "lr_policy \"sigmoid\" with gamma 0 keeps the rate at half of base_lr; set gamma (negative "
                      "to lower the rate after stepsize)";
    return;
  }
  if (policy == "inv") {
    // 1 + gamma * iter must stay positive for its power to be a rate.
    CREMA_CHECK(param.gamma() >= 0) << "lr_policy \"inv\" needs gamma of 0 or more, got " << param.gamma();
    if (param.gamma() == 0 || param.power() == 0)
      LOG(WARNING) << "lr_policy \"inv\" with " << (param.gamma() == 0 ? "gamma" : "power")
                   << " 0 keeps the rate at base_lr, as \"fixed\" does; set gamma and power (e.g. 0.0001 and 0.75) "
                      "for a decay";
    return;
  }
  if (policy == "poly") {
    CREMA_CHECK(param.power() >= 0) << "lr_policy \"poly\" needs power of 0 or more, got " << param.power()
                                    << " (the rate would grow without bound towards max_iter)";
    if (param.power() == 0)
      LOG(WARNING) << "lr_policy \"poly\" with power 0 keeps the rate at base_lr, as \"fixed\" does; set power "
                      "(e.g. 1 for a linear decay to 0 at max_iter)";
    return;
  }
  if (policy == "multistep") {
    CREMA_CHECK(param.stepvalue_size() > 0) << "lr_policy \"multistep\" needs at least one stepvalue";
    for (int i = 1; i < param.stepvalue_size(); ++i)
      CREMA_CHECK(param.stepvalue(i) > param.stepvalue(i - 1))
          << "lr_policy \"multistep\": stepvalue must increase, but " << param.stepvalue(i) << " follows "
          << param.stepvalue(i - 1);
    require_factor();
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
