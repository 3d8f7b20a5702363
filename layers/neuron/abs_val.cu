// The GPU kernels of AbsVal's rules (abs_val.hpp); the layer's code is in abs_val.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/abs_val.hpp"

CREMA_GPU_ELEMENTWISE(crema::AbsValForward);
CREMA_GPU_ELEMENTWISE(crema::AbsValBackward);
