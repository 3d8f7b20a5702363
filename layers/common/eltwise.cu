// The GPU kernels of Eltwise's rules (eltwise.hpp); the layer's code is in eltwise.cpp.
#include "core/elementwise.cuh"
#include "layers/common/eltwise.hpp"

CREMA_GPU_ELEMENTWISE(crema::EltwiseForwardRule);
CREMA_GPU_ELEMENTWISE(crema::EltwiseBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::EltwiseProductGradientRule);
CREMA_GPU_ELEMENTWISE(crema::EltwiseHalfSumRule);
