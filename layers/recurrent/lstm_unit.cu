// The GPU kernels of LSTMUnit's rules (lstm_unit.hpp); the layer's code is in lstm_unit.cpp.
#include "core/elementwise.cuh"
#include "layers/recurrent/lstm_unit.hpp"

CREMA_GPU_ELEMENTWISE(crema::LSTMUnitForwardRule);
CREMA_GPU_ELEMENTWISE(crema::LSTMUnitBackwardRule);
