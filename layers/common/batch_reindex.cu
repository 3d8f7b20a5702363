// The GPU kernels of BatchReindex's rules (batch_reindex.hpp); the layer's code is in batch_reindex.cpp.
#include "core/elementwise.cuh"
#include "layers/common/batch_reindex.hpp"

CREMA_GPU_ELEMENTWISE(crema::BatchReindexForwardRule);
CREMA_GPU_ELEMENTWISE(crema::BatchReindexBackwardRule);
