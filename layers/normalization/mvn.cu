// The GPU kernels of MVN's rules (mvn.hpp); the layer's code is in mvn.cpp.
#include "core/elementwise.cuh"
#include "layers/normalization/mvn.hpp"

CREMA_GPU_ELEMENTWISE(crema::MVNCenterRule);
CREMA_GPU_ELEMENTWISE(crema::MVNScaleRule);
CREMA_GPU_ELEMENTWISE(crema::MVNProductRule);
CREMA_GPU_ELEMENTWISE(crema::MVNBackwardRule);
