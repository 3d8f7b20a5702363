// The GPU kernels of Crop's rules (crop.hpp); the layer's code is in crop.cpp.
#include "core/elementwise.cuh"
#include "layers/vision/crop.hpp"

CREMA_GPU_ELEMENTWISE(crema::CropForwardRule);
CREMA_GPU_ELEMENTWISE(crema::CropBackwardRule);
