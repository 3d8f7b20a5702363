// The GPU kernels of Embed's rules (embed.hpp); the layer's code is in embed.cpp.
#include "core/elementwise.cuh"
#include "layers/common/embed.hpp"

CREMA_GPU_ELEMENTWISE(crema::EmbedForwardRule);
CREMA_GPU_ELEMENTWISE(crema::EmbedWeightGradientRule);
