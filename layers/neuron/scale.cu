// The GPU kernel of Scale's rule (scale.hpp); the layer's code is in scale.cpp (its products use bias.hpp's rule).
#include "core/elementwise.cuh"
#include "layers/neuron/scale.hpp"

CREMA_GPU_ELEMENTWISE(crema::ScaleForwardRule);
