// Nets, weights and solvers in Caffe's legacy forms, read as if written today.
//
// What is upgraded, in this order (each step in net/upgrade_steps.hpp):
//   V0 nets            `layers { layer { type: "conv" ... } }`, padding layers folded  -> V1 (upgrade_v0.cpp)
//   data layers        scale / mean_file / crop_size / mirror in their own parameters -> transform_param
//   V1 nets            `layers { type: CONVOLUTION blobs_lr: 1 ... }`                 -> `layer` (upgrade_v1.cpp)
//   BatchNorm          three param specs of Caffe's first BatchNorm                    -> lr_mult and decay_mult 0
//   net inputs         input / input_shape / input_dim                                 -> an Input layer (only on
//                      request: nets built by crema do this in their upgrade_inputs pass)
//   solvers            solver_type: ADAM                                               -> type: "Adam"
// Weights stay with their layers, so a V1 or V0 .caffemodel copies into today's net.
//
// Each upgrade done yields one notice, a line naming the origin (file or net) and what changed. Nets read by
// crema log them as warnings (LogUpgradeNotices); the upgrade tools print them and write today's form.
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

// Whether the net-level input fields count as something to upgrade.
enum class NetInputs { kKeep, kIntoInputLayer };

// Whether `param` is in any legacy form listed above (the input fields only with kIntoInputLayer).
bool NetNeedsUpgrade(const NetParameter& param, NetInputs inputs = NetInputs::kKeep);
// Rewrites `param` in today's form; returns the notices, each starting with `origin`. Throws a crema::Error
// naming the origin and the layer for what has no upgrade (an unknown V0 type, a misplaced padding layer, a
// net with both `layer` and `layers`).
std::vector<std::string> UpgradeLegacyNet(NetParameter* param, const std::string& origin,
                                          NetInputs inputs = NetInputs::kKeep);

// Logs each notice as a warning, with a hint at the upgrade tools, unless this process logged the same notices
// for the same legacy net already: a solver reads its net file for the training net and again for each test
// net, and one file deserves one set of notices. `legacy` is the net as read (its state is not compared).
void LogUpgradeNotices(const NetParameter& legacy, const std::vector<std::string>& notices);
// UpgradeLegacyNet, then LogUpgradeNotices: for nets and weights crema reads from `origin` to use.
void UpgradeLegacyNetAndLog(NetParameter* param, const std::string& origin);
// The parameter pass `upgrade_legacy`, first in NetPasses::Default(): the upgrade of a net handed over as a
// message, its notices naming it "net 'NAME'".
NetParameter UpgradeLegacyNetPass(const NetParameter& param);

// Whether the solver uses solver_type, or names a net inline (net_param, train_net_param, test_net_param)
// that needs upgrading.
bool SolverNeedsUpgrade(const SolverParameter& param);
// solver_type becomes type (an error when both are set and disagree), and inline nets are upgraded with their
// inputs made an Input layer. Returns the notices, each starting with `origin`.
std::vector<std::string> UpgradeLegacySolver(SolverParameter* param, const std::string& origin);

}  // namespace crema
