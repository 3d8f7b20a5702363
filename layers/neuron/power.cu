// The GPU kernels of Power's rules (power.hpp); the layer's code is in power.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/power.hpp"

CREMA_GPU_ELEMENTWISE(crema::PowerForward);
CREMA_GPU_ELEMENTWISE(crema::PowerBackward);
