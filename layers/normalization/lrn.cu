// The GPU kernels of LRN's rules (lrn.hpp); the layer's code is in lrn.cpp.
#include "core/elementwise.cuh"
#include "layers/normalization/lrn.hpp"

CREMA_GPU_ELEMENTWISE(crema::LRNForwardRule);
CREMA_GPU_ELEMENTWISE(crema::LRNRatioRule);
CREMA_GPU_ELEMENTWISE(crema::LRNBackwardRule);
