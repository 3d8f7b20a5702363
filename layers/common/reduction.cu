// The GPU kernels of Reduction's rules (reduction.hpp); the layer's code is in reduction.cpp.
#include "core/elementwise.cuh"
#include "layers/common/reduction.hpp"

CREMA_GPU_ELEMENTWISE(crema::ReductionTermRule);
CREMA_GPU_ELEMENTWISE(crema::ReductionBackwardRule);
