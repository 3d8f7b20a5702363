// The GPU kernels of MultinomialLogisticLoss's rules (multinomial_logistic_loss.hpp); the layer's code is in
// multinomial_logistic_loss.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/multinomial_logistic_loss.hpp"

CREMA_GPU_ELEMENTWISE(crema::MultinomialLogisticTermRule);
CREMA_GPU_ELEMENTWISE(crema::MultinomialLogisticGradientRule);
