// The GPU kernels of LSTM's rules (lstm.hpp); the layer's code is in lstm.cpp and recurrent.cpp.
#include "core/elementwise.cuh"
#include "layers/recurrent/lstm.hpp"

CREMA_GPU_ELEMENTWISE(crema::LSTMStepForwardRule);
CREMA_GPU_ELEMENTWISE(crema::LSTMStepBackwardRule);
