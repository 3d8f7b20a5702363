// The GPU kernels of Pooling's rules (pooling.hpp); the layer's code is in pooling.cpp.
#include "core/elementwise.cuh"
#include "layers/vision/pooling.hpp"

CREMA_GPU_ELEMENTWISE(crema::MaxPoolForwardRule);
CREMA_GPU_ELEMENTWISE(crema::MaxPoolForwardRuleOf<uint16_t>);
CREMA_GPU_ELEMENTWISE(crema::AvePoolForwardRule);
CREMA_GPU_ELEMENTWISE(crema::AvePoolForwardRuleOf<uint16_t>);
CREMA_GPU_ELEMENTWISE(crema::StochasticPoolForwardRule);
CREMA_GPU_ELEMENTWISE(crema::StochasticPoolTestBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::PoolBackwardRule);
