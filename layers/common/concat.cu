// The GPU kernels of Concat's rules (concat.hpp), which Slice shares; the code is in concat.cpp.
#include "core/elementwise.cuh"
#include "layers/common/concat.hpp"

CREMA_GPU_ELEMENTWISE(crema::JoinPartsRule<float>);
CREMA_GPU_ELEMENTWISE(crema::JoinPartsRule<uint16_t>);
CREMA_GPU_ELEMENTWISE(crema::CutPartsRule);
