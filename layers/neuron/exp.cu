// The GPU kernels of Exp's rules (exp.hpp); the layer's code is in exp.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/exp.hpp"

CREMA_GPU_ELEMENTWISE(crema::ExpForward);
CREMA_GPU_ELEMENTWISE(crema::ExpBackward);
