// The GPU kernels of RNN's rules (rnn.hpp); the layer's code is in rnn.cpp and recurrent.cpp.
#include "core/elementwise.cuh"
#include "layers/recurrent/rnn.hpp"

CREMA_GPU_ELEMENTWISE(crema::RNNStepForwardRule);
CREMA_GPU_ELEMENTWISE(crema::RNNOutputRule);
CREMA_GPU_ELEMENTWISE(crema::RNNOutputBackwardRule);
CREMA_GPU_ELEMENTWISE(crema::RNNStepBackwardRule);
