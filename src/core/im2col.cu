// The GPU kernels of the unrolling rules (im2col.hpp); the host loops and the dispatch are in im2col.cpp.
#include "core/elementwise.cuh"
#include "core/im2col.hpp"

CREMA_GPU_ELEMENTWISE(crema::Im2colRule);
CREMA_GPU_ELEMENTWISE(crema::Im2colRuleOf<uint16_t>);
CREMA_GPU_ELEMENTWISE(crema::Col2imRule);
