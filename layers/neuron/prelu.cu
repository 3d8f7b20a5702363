// The GPU kernels of PReLU's rules (prelu.hpp); the layer's code is in prelu.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/prelu.hpp"

CREMA_GPU_ELEMENTWISE(crema::PReLUForwardRule);
CREMA_GPU_ELEMENTWISE(crema::PReLUBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::PReLUSlopeTermRule);
