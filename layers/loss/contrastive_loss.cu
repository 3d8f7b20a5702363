// The GPU kernels of ContrastiveLoss's rules (contrastive_loss.hpp); the layer's code is in contrastive_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/contrastive_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::ContrastiveDifferenceRule);
CREMA_GPU_ELEMENTWISE(crema::ContrastiveTermRule);
CREMA_GPU_ELEMENTWISE(crema::ContrastiveGradientRule);
