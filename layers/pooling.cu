// The GPU kernels of Pooling's MAX and AVE rules (pooling.hpp); the layer's code is in pooling.cpp.
#include "core/elementwise.cuh"
#include "layers/pooling.hpp"

CREMA_GPU_ELEMENTWISE(crema::MaxPoolForwardRule);
CREMA_GPU_ELEMENTWISE(crema::AvePoolForwardRule);
CREMA_GPU_ELEMENTWISE(crema::PoolBackwardRule);
