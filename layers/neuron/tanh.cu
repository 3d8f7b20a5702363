// The GPU kernels of TanH's rules (tanh.hpp); the layer's code is in tanh.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/tanh.hpp"

CREMA_GPU_ELEMENTWISE(crema::TanHForward);
CREMA_GPU_ELEMENTWISE(crema::TanHBackward);
