// The GPU kernels of the solvers' update rules (update_rules.hpp).
#include "core/elementwise.cuh"
#include "solver/update_rules.hpp"

CREMA_GPU_ELEMENTWISE(crema::ScaleBy);
CREMA_GPU_ELEMENTWISE(crema::L2Decay);
CREMA_GPU_ELEMENTWISE(crema::L1Decay);
CREMA_GPU_ELEMENTWISE(crema::SgdMomentum);
CREMA_GPU_ELEMENTWISE(crema::NesterovUpdate);
CREMA_GPU_ELEMENTWISE(crema::AdaGradUpdate);
CREMA_GPU_ELEMENTWISE(crema::RMSPropUpdate);
CREMA_GPU_ELEMENTWISE(crema::AdaDeltaUpdate);
CREMA_GPU_ELEMENTWISE(crema::AdamUpdate);
