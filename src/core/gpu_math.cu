#include "core/elementwise.cuh"
#include "core/gpu_math.hpp"

namespace crema {

void gpu_set(int n, float value, float* x) {
  for_each_element_gpu(n, [=] __device__(int i) { x[i] = value; });
}

void gpu_scale(int n, float alpha, float* x) {
  for_each_element_gpu(n, [=] __device__(int i) { x[i] *= alpha; });
}

void gpu_axpy(int n, float alpha, const float* x, float* y) {
  for_each_element_gpu(n, [=] __device__(int i) { y[i] += alpha * x[i]; });
}

}  // namespace crema
