// The GPU kernels of Dropout's rules (dropout.hpp); the layer's code is in dropout.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/dropout.hpp"

CREMA_GPU_ELEMENTWISE(crema::DropoutMaskRule);
CREMA_GPU_ELEMENTWISE(crema::DropoutApply);
