// The GPU kernels of the half-precision conversions (half_products.hpp).
#include "core/elementwise.cuh"
#include "core/half_products.hpp"

CREMA_GPU_ELEMENTWISE(crema::RoundToHalfRule);
CREMA_GPU_ELEMENTWISE(crema::WidenFromHalfRule);
