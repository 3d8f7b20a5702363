// The CUDA twin of elementwise.hpp: runs a per-element rule (a __device__ lambda) as a grid-stride kernel.
#pragma once

#include <cuda_runtime.h>

#include "core/common.hpp"
#include "core/cuda_check.hpp"

namespace crema {

template <typename Rule>
__global__ void elementwise_kernel(int n, Rule rule) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) rule(i);
}

template <typename Rule>
inline void for_each_element_gpu(int n, Rule rule) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int blocks = (n + kThreads - 1) / kThreads < 65535 ? (n + kThreads - 1) / kThreads : 65535;
  elementwise_kernel<<<blocks, kThreads>>>(n, rule);
  CREMA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace crema
