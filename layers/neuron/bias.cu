// The GPU kernel of Bias's rule (bias.hpp); the layer's code is in bias.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/bias.hpp"

CREMA_GPU_ELEMENTWISE(crema::BiasForwardRule);
