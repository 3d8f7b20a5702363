// The GPU kernels of Sigmoid's rules (sigmoid.hpp); the layer's code is in sigmoid.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/sigmoid.hpp"

CREMA_GPU_ELEMENTWISE(crema::SigmoidForward);
CREMA_GPU_ELEMENTWISE(crema::SigmoidBackward);
