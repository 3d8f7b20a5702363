// The GPU kernels of Clip's rules (clip.hpp); the layer's code is in clip.cpp.
#include "core/elementwise.cuh"
#include "layers/neuron/clip.hpp"

CREMA_GPU_ELEMENTWISE(crema::ClipForward);
CREMA_GPU_ELEMENTWISE(crema::ClipBackward);
