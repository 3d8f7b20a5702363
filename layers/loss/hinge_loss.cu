// The GPU kernels of HingeLoss's rules (hinge_loss.hpp); the layer's code is in hinge_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/hinge_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::HingeTermRule);
CREMA_GPU_ELEMENTWISE(crema::HingeGradientRule);
