// The GPU kernels of Swish's rules (swish.hpp); the layer's code is in swish.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/swish.hpp"

CREMA_GPU_ELEMENTWISE(crema::SwishForward);
CREMA_GPU_ELEMENTWISE(crema::SwishBackward);
