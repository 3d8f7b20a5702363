// The GPU kernels of BNLL's rules (bnll.hpp); the layer's code is in bnll.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/bnll.hpp"

CREMA_GPU_ELEMENTWISE(crema::BNLLForward);
CREMA_GPU_ELEMENTWISE(crema::BNLLBackward);
