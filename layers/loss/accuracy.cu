// The GPU kernel of Accuracy's rule (accuracy.hpp); the layer's code is in accuracy.cpp.
#include "core/elementwise.cuh"
#include "layers/loss/accuracy.hpp"

CREMA_GPU_ELEMENTWISE(crema::AccuracyHitRule);
