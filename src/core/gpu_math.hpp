// Vector helpers on device memory (CUDA builds only). Each one is the same per-element rule as its cpu_*
// twin in math_functions.hpp.
#pragma once

#ifdef CREMA_USE_CUDA
namespace crema {

void gpu_set(int n, float value, float* x);
void gpu_scale(int n, float alpha, float* x);
// y += alpha * x
void gpu_axpy(int n, float alpha, const float* x, float* y);

}  // namespace crema
#endif
