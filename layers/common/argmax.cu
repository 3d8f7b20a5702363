// The GPU kernel of ArgMax's rule (argmax.hpp); the layer's code is in argmax.cpp.
#include "core/elementwise.cuh"
#include "layers/common/argmax.hpp"

CREMA_GPU_ELEMENTWISE(crema::ArgMaxRule);
