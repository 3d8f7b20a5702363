// The normalizers of Caffe's loss layers that follow loss_param (SigmoidCrossEntropyLoss, InfogainLoss): which
// mode a LossParameter chooses, and the divisor that mode gives.
#pragma once

#include <algorithm>

#include "core/common.hpp"

namespace crema {

// The mode `loss_param` asks for: `normalization` when set; else the deprecated `normalize` (true: VALID,
// false: BATCH_SIZE) when set; else `fallback` (VALID for most losses, BATCH_SIZE for SigmoidCrossEntropyLoss).
inline LossParameter::NormalizationMode ChosenNormalization(const LossParameter& loss_param,
                                                            LossParameter::NormalizationMode fallback) {
  if (loss_param.has_normalization()) return loss_param.normalization();
  if (loss_param.has_normalize()) return loss_param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  return fallback;
}

// The divisor of the summed loss: FULL = outer * inner predictions, VALID = the `valid` ones that were not
// ignored, BATCH_SIZE = outer, NONE = 1; never below 1, so an all-ignored batch gives a zero loss.
inline float LossNormalizer(LossParameter::NormalizationMode mode, int outer, int inner, int valid) {
  double value = 1.0;
  switch (mode) {
    case LossParameter::FULL:
      value = static_cast<double>(outer) * inner;
      break;
    case LossParameter::VALID:
      value = valid;
      break;
    case LossParameter::BATCH_SIZE:
      value = outer;
      break;
    case LossParameter::NONE:
      value = 1.0;
      break;
  }
  return static_cast<float>(std::max(value, 1.0));
}

}  // namespace crema
