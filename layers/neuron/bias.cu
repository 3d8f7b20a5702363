// The GPU kernels of Bias's rules and the shared product rule (bias.hpp); the layer's code is in bias.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/bias.hpp"

CREMA_GPU_ELEMENTWISE(crema::BiasForwardRule);
CREMA_GPU_ELEMENTWISE(crema::ProductRule);
