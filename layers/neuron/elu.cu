// The GPU kernels of ELU's rules (elu.hpp); the layer's code is in elu.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/elu.hpp"

CREMA_GPU_ELEMENTWISE(crema::ELUForward);
CREMA_GPU_ELEMENTWISE(crema::ELUBackward);
