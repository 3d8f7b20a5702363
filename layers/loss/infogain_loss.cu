// The GPU kernels of InfogainLoss's rules (infogain_loss.hpp); the layer's code is in infogain_loss.cpp. Its
// softmax runs on Softmax's kernels (softmax.cu).
#include "core/elementwise.cuh"
#include "layers/loss/infogain_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::InfogainTermRule);
CREMA_GPU_ELEMENTWISE(crema::InfogainGradientRule);
