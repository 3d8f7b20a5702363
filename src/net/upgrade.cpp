#include "net/upgrade.hpp"

#include <glog/logging.h>

#include <functional>
#include <mutex>
#include <set>

#include "net/upgrade_steps.hpp"

namespace crema {

bool NetNeedsUpgrade(const NetParameter& param, NetInputs inputs) {
  return param.layers_size() > 0 || NetHasDataTransformFields(param) || NetHasOldBatchNormSpecs(param) ||
         (inputs == NetInputs::kIntoInputLayer && param.input_size() > 0);
}

std::vector<std::string> UpgradeLegacyNet(NetParameter* param, const std::string& origin, NetInputs inputs) {
  Notices notices;
  UpgradeV0Layers(param, origin, &notices);
  // Before the V1 step: only there is a V1 entry told from a `layer` one, and they resolve conflicts differently.
  MoveDataTransformFields(param, origin, &notices);
  UpgradeV1Layers(param, origin, &notices);
  FixBatchNormSpecs(param, origin, &notices);
  if (inputs == NetInputs::kIntoInputLayer) MoveInputsIntoLayer(param, origin, &notices);
  return notices;
}

void LogUpgradeNotices(const NetParameter& legacy, const std::vector<std::string>& notices) {
  if (notices.empty()) return;
  NetParameter stateless(legacy);
  stateless.clear_state();
  std::string key = stateless.SerializeAsString();
  for (const auto& notice : notices) key += "\n" + notice;
  static std::mutex mutex;
  static std::set<size_t> logged;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!logged.insert(std::hash<std::string>()(key)).second) return;
  }
  for (size_t i = 0; i + 1 < notices.size(); ++i) LOG(WARNING) << notices[i];
  LOG(WARNING) << notices.back()
               << " (upgrade_net_proto_text and upgrade_net_proto_binary write such files in today's form)";
}

void UpgradeLegacyNetAndLog(NetParameter* param, const std::string& origin) {
  if (!NetNeedsUpgrade(*param)) return;
  const NetParameter legacy(*param);
  LogUpgradeNotices(legacy, UpgradeLegacyNet(param, origin));
}

NetParameter UpgradeLegacyNetPass(const NetParameter& param) {
  NetParameter upgraded(param);
  UpgradeLegacyNetAndLog(&upgraded, "net '" + param.name() + "'");
  return upgraded;
}

namespace {

// Today's type name of each deprecated SolverType, in the enum's order.
const char* const kSolverTypeNames[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};

// The solver's inline nets, each with the name its field gives it in notices.
std::vector<std::pair<std::string, NetParameter*>> InlineNets(SolverParameter* param) {
  std::vector<std::pair<std::string, NetParameter*>> nets;
  if (param->has_net_param()) nets.emplace_back("net_param", param->mutable_net_param());
  if (param->has_train_net_param()) nets.emplace_back("train_net_param", param->mutable_train_net_param());
  for (int i = 0; i < param->test_net_param_size(); ++i)
    nets.emplace_back("test_net_param " + std::to_string(i), param->mutable_test_net_param(i));
  return nets;
}

}  // namespace

bool SolverNeedsUpgrade(const SolverParameter& param) {
  if (param.has_solver_type()) return true;
  SolverParameter copy(param);
  for (const auto& [field, net] : InlineNets(&copy))
    if (NetNeedsUpgrade(*net, NetInputs::kIntoInputLayer)) return true;
  return false;
}

std::vector<std::string> UpgradeLegacySolver(SolverParameter* param, const std::string& origin) {
  std::vector<std::string> notices;
  if (param->has_solver_type()) {
    const std::string type = kSolverTypeNames[param->solver_type()];
    const std::string enum_name = SolverParameter::SolverType_Name(param->solver_type());
    CREMA_CHECK(!param->has_type() || param->type() == type)
        << origin << ": the solver sets type: \"" << param->type() << "\" and the deprecated solver_type: " << enum_name
        << ", which disagree; keep only type";
    param->set_type(type);
    param->clear_solver_type();
    notices.push_back(origin + ": replaced the deprecated solver_type: " + enum_name + " by type: \"" + type + "\"");
  }
  for (const auto& [field, net] : InlineNets(param)) {
    const std::vector<std::string> net_notices =
        UpgradeLegacyNet(net, origin + " (" + field + ")", NetInputs::kIntoInputLayer);
    notices.insert(notices.end(), net_notices.begin(), net_notices.end());
  }
  return notices;
}

}  // namespace crema
