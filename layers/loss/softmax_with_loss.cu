// The GPU kernels of SoftmaxWithLoss's rules (softmax_with_loss.hpp); the layer's code is in
// softmax_with_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/softmax_with_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::SoftmaxLossTermRule);
CREMA_GPU_ELEMENTWISE(crema::SoftmaxLossGradientRule);
