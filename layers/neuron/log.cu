// The GPU kernels of Log's rules (log.hpp); the layer's code is in log.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/log.hpp"

CREMA_GPU_ELEMENTWISE(crema::LogForward);
CREMA_GPU_ELEMENTWISE(crema::LogBackward);
