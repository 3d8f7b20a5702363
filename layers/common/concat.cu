// The GPU kernels of Concat's rules (concat.hpp), which Slice shares; the code is in concat.cpp.
#include "core/elementwise.cuh"
#include "layers/common/concat.hpp"

CREMA_GPU_ELEMENTWISE(crema::JoinPartsRule);
CREMA_GPU_ELEMENTWISE(crema::CutPartsRule);
