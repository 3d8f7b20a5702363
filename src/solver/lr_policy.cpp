#include "solver/lr_policy.hpp"

#include <glog/logging.h>

#include <algorithm>
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
    // sigmoid's stepsize is only where the rate crosses base_lr / 2: Caffe takes 0 (the crossing at iteration 0).
    if (policy == "sigmoid" && param.stepsize() == 0) {
      LOG(WARNING) << "lr_policy \"sigmoid\" with stepsize 0 (unset?) centres the sigmoid at iteration 0, so the rate "
                      "starts at half of base_lr, as Caffe does; set stepsize to the iteration of that crossing";
    } else {
      CREMA_CHECK(param.stepsize() > 0) << "lr_policy \"" << policy << "\" needs a positive stepsize, got "
                                        << param.stepsize();
    }
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
    if (param.stepvalue_size() == 0) {
      // No step to take: the rate stays base_lr, gamma unused.
      LOG(WARNING) << "lr_policy \"multistep\" without stepvalue keeps the rate at base_lr, as \"fixed\" does, as "
                      "Caffe does; add stepvalue lines for the iterations where the rate drops";
      return;
    }
    for (int i = 1; i < param.stepvalue_size(); ++i) {
      if (param.stepvalue(i) <= param.stepvalue(i - 1)) {
        LOG(WARNING) << "lr_policy \"multistep\": stepvalue " << param.stepvalue(i) << " (number " << i + 1
                     << ") does not come after " << param.stepvalue(i - 1) << "; once passed, each step is taken "
                     << "one iteration after the one before, as Caffe does; list the stepvalues in increasing order";
        break;
      }
    }
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
    // Caffe's rate is asked once per iteration from iteration 0 and takes at most one step each time: step s is
    // taken at the first iteration at or after stepvalue(s) that comes after the iteration step s - 1 was taken
    // at. Replayed here from the step values (so that any `iter` gives the step of a run that reached it); for
    // increasing step values that is the count of those passed.
    int steps = 0;
    for (long long at = 0; steps < param.stepvalue_size(); ++steps, ++at) {
      at = std::max<long long>(at, param.stepvalue(steps));
      if (at > iter) break;
    }
    *current_step = std::max(*current_step, steps);
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
