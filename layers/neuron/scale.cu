// The GPU kernels of Scale's rules (scale.hpp); the layer's code is in scale.cpp.
#include "core/channel_sums.cuh"
#include "core/elementwise.cuh"
#include "layers/neuron/scale.hpp"

CREMA_GPU_ELEMENTWISE(crema::ScaleForwardRule);
CREMA_GPU_CHANNEL_SUMS(crema::ScaleGradientTerms);
