// The GPU kernels of the solvers' update rules (update_rules.hpp).
#include "core/elementwise.cuh"
#include "solver/update_rules.hpp"

CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::SgdMomentum>);
CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::NesterovUpdate>);
CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::AdaGradUpdate>);
CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::RMSPropUpdate>);
CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::AdaDeltaUpdate>);
CREMA_GPU_ELEMENTWISE(crema::AfterPrologue<crema::AdamUpdate>);
