// Learning-rate schedules, as Caffe defines them (docs/solvers.md has the formulas).
#pragma once

#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

// Checks that the solver's lr_policy is known and has the settings it needs; throws naming the field. Settings
// Caffe takes though they look like mistakes (sigmoid with stepsize 0, multistep without stepvalue or with step
// values that do not increase) are followed as Caffe does, with a warning here: call it once per solver.
void CheckLearningRatePolicy(const SolverParameter& param);

// The rate at iteration `iter`. `current_step` is the multistep position (how many step values have been
// passed); the function advances it, and it is saved with the solver state. As in Caffe, which takes at most
// one step per iteration: a step value not above the one before is passed one iteration after it.
float LearningRate(const SolverParameter& param, int iter, int* current_step);

std::vector<std::string> KnownLearningRatePolicies();

}  // namespace crema
