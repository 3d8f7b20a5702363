// The GPU kernels of Concat's rules (concat.hpp), which Slice shares; the code is in concat.cpp.
#include "core/elementwise.cuh"
#include "layers/concat.hpp"

CREMA_GPU_ELEMENTWISE(crema::JoinPartsRule);
CREMA_GPU_ELEMENTWISE(crema::CutPartsRule);
