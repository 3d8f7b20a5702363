// The GPU kernels of EuclideanLoss's rules (euclidean_loss.hpp); the layer's code is in euclidean_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/euclidean_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::EuclideanDifferenceRule);
CREMA_GPU_ELEMENTWISE(crema::EuclideanGradientRule);
