// CUDA error checks that raise crema::Error with the failing call and CUDA's own words.
#pragma once

#ifdef CREMA_USE_CUDA
#include <cuda_runtime_api.h>

#define CREMA_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    cudaError_t crema_cuda_status = (call);                                                      \
    CREMA_CHECK(crema_cuda_status == cudaSuccess)                                                \
        << "CUDA call " #call " failed: " << cudaGetErrorString(crema_cuda_status);              \
  } while (0)
#endif
