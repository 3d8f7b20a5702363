// The GPU kernels of BatchNorm's rules (batch_norm.hpp); the layer's code is in batch_norm.cpp.
#include "core/channel_sums.cuh"
#include "core/elementwise.cuh"
#include "layers/normalization/batch_norm.hpp"

CREMA_GPU_ELEMENTWISE(crema::BatchNormStoredRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormUpdateRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeRuleOf<float>);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeRuleOf<uint16_t>);
CREMA_GPU_ELEMENTWISE(crema::BatchNormBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormAffineRuleOf<float>);
CREMA_GPU_ELEMENTWISE(crema::BatchNormAffineRuleOf<uint16_t>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormValueTerms);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormSquaredDeviationTerms);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormGradientTerms);
