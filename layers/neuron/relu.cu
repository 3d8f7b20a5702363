// The GPU kernels of ReLU's rules (relu.hpp); the layer's code is in relu.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/relu.hpp"

CREMA_GPU_ELEMENTWISE(crema::ReLUForward);
CREMA_GPU_ELEMENTWISE(crema::ReLUBackward);
CREMA_GPU_ELEMENTWISE(crema::ReLUBackwardOf<uint16_t>);
