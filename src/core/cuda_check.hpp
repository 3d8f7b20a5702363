// CUDA and cuBLAS error checks that raise crema::Error with the failing call and the library's own words.
#pragma once

#ifdef CREMA_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/common.hpp"
#include "core/cublas_library.hpp"

#define CREMA_CUDA_CHECK(call)                                                      \
  do {                                                                              \
    cudaError_t crema_cuda_status = (call);                                         \
    CREMA_CHECK(crema_cuda_status == cudaSuccess)                                   \
        << "CUDA call " #call " failed: " << cudaGetErrorString(crema_cuda_status); \
  } while (0)

#define CREMA_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                 \
    cublasStatus_t crema_cublas_status = (call);                                                       \
    CREMA_CHECK(crema_cublas_status == CUBLAS_STATUS_SUCCESS)                                          \
        << "cuBLAS call " #call " failed: " << ::crema::Cublas().GetStatusString(crema_cublas_status); \
  } while (0)
#endif

// cuDNN's check is cudnn::Check, in the adapter (core/cudnn.hpp), where every cuDNN call lives.
