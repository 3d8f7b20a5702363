// The GPU kernel of SPP's rule (spp.hpp); the layer's code is in spp.cpp, its levels are Pooling layers.
#include "core/elementwise.cuh"
#include "layers/vision/spp.hpp"

CREMA_GPU_ELEMENTWISE(crema::SPPLevelCopyRule);
