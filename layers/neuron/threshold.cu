// The GPU kernel of Threshold's rule (threshold.hpp); the layer's code is in threshold.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/threshold.hpp"

CREMA_GPU_ELEMENTWISE(crema::ThresholdForward);
