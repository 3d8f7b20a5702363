// The GPU kernels of Softmax's rules (softmax.hpp); the layer's code is in softmax.cpp.
#include "core/elementwise.cuh"
#include "layers/common/softmax.hpp"

CREMA_GPU_ELEMENTWISE(crema::SoftmaxForwardRule);
CREMA_GPU_ELEMENTWISE(crema::SoftmaxBackwardRule);
