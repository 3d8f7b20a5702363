// The GPU kernels of BatchNorm's rules (batch_norm.hpp); the layer's code is in batch_norm.cpp.
#include "core/channel_sums.cuh"
#include "core/elementwise.cuh"
#include "layers/normalization/batch_norm.hpp"

namespace crema {
// The normalization's four pairs of input and output types, named for the one-argument macro.
using BatchNormNormalizeFloats = BatchNormNormalizeRuleOf<float, float>;
using BatchNormNormalizeFloatsToHalf = BatchNormNormalizeRuleOf<float, uint16_t>;
using BatchNormNormalizeHalfToFloats = BatchNormNormalizeRuleOf<uint16_t, float>;
using BatchNormNormalizeHalf = BatchNormNormalizeRuleOf<uint16_t, uint16_t>;
}  // namespace crema

CREMA_GPU_ELEMENTWISE(crema::BatchNormStoredRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormUpdateRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeFloats);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeFloatsToHalf);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeHalfToFloats);
CREMA_GPU_ELEMENTWISE(crema::BatchNormNormalizeHalf);
CREMA_GPU_ELEMENTWISE(crema::BatchNormBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::BatchNormAffineRuleOf<float>);
CREMA_GPU_ELEMENTWISE(crema::BatchNormAffineRuleOf<uint16_t>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormValueTermsOf<float>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormValueTermsOf<uint16_t>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormSquaredDeviationTermsOf<float>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormSquaredDeviationTermsOf<uint16_t>);
CREMA_GPU_CHANNEL_SUMS(crema::BatchNormGradientTerms);
