// The GPU kernels of SigmoidCrossEntropyLoss's rules (sigmoid_cross_entropy_loss.hpp); the layer's code is in
// sigmoid_cross_entropy_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/sigmoid_cross_entropy_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::SigmoidCrossEntropyTermRule);
CREMA_GPU_ELEMENTWISE(crema::SigmoidCrossEntropyGradientRule);
