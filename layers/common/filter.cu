// The GPU kernels of Filter's rules (filter.hpp); the layer's code is in filter.cpp.
#include "core/elementwise.cuh"
#include "layers/common/filter.hpp"

CREMA_GPU_ELEMENTWISE(crema::FilterForwardRule);
CREMA_GPU_ELEMENTWISE(crema::FilterBackwardRule);
