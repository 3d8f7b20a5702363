// The GPU kernels of the half-precision conversions (half_products.hpp).
#include "core/elementwise.cuh"
#include "core/half_products.hpp"

CREMA_GPU_ELEMENTWISE(crema::RoundToHalfRule);
CREMA_GPU_ELEMENTWISE(crema::WidenFromHalfRule);
CREMA_GPU_ELEMENTWISE(crema::HalfTopRule<float>);
CREMA_GPU_ELEMENTWISE(crema::HalfTopRule<uint16_t>);
