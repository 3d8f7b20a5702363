// The GPU half of elementwise.hpp: runs a per-element rule (a CREMA_HOST_DEVICE functor, or a __device__
// lambda inside a .cu file) as a grid-stride kernel on the context's stream.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "core/elementwise.hpp"

namespace crema {

template <typename Rule>
__global__ void elementwise_kernel(int n, Rule rule) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) rule(i);
}

template <typename Rule>
void for_each_element_gpu(Context& context, int n, const Rule& rule) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int blocks = (n + kThreads - 1) / kThreads < 65535 ? (n + kThreads - 1) / kThreads : 65535;
  elementwise_kernel<<<blocks, kThreads, 0, context.stream()>>>(n, rule);
  CREMA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace crema

// Compiles the GPU kernel of `Rule` (at namespace scope of a .cu file, outside namespace crema).
#define CREMA_GPU_ELEMENTWISE(Rule) \
  template void crema::for_each_element_gpu<Rule>(crema::Context&, int, const Rule&)
