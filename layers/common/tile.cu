// The GPU kernels of Tile's rules (tile.hpp); the layer's code is in tile.cpp.
#include "core/elementwise.cuh"
#include "layers/common/tile.hpp"

CREMA_GPU_ELEMENTWISE(crema::TileForwardRule);
CREMA_GPU_ELEMENTWISE(crema::TileBackwardRule);
