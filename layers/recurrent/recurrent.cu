// The GPU kernel of the recurrent layers' shared rule (recurrent.hpp); their code is in recurrent.cpp.
#include "core/elementwise.cuh"
#include "layers/recurrent/recurrent.hpp"

CREMA_GPU_ELEMENTWISE(crema::RecurrentContRule);
