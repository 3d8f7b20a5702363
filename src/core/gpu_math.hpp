// Dense linear algebra and vector math on device memory (CUDA builds only), on the context's cuBLAS handle
// and stream. Each one is the same operation as its cpu_* twin in math_functions.hpp.
#pragma once

#ifdef CREMA_USE_CUDA
#include <cstdint>

#include "core/context.hpp"
#include "core/math_functions.hpp"

namespace crema {

void gpu_gemm(Context& context, Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C);
// The same product with A and B holding 16-bit values (bfloat16 where `bfloat16`, else float16) and C float32, summed
// in float32 on the tensor cores (cublasGemmEx, compute type 32F; core/half_products.hpp).
void gpu_gemm_half(Context& context, bool bfloat16, Transpose trans_a, Transpose trans_b, int M, int N, int K,
                   float alpha, const uint16_t* A, const uint16_t* B, float beta, float* C);
void gpu_gemv(Context& context, Transpose trans_a, int M, int N, float alpha, const float* A, const float* x,
              float beta, float* y);
void gpu_axpy(Context& context, int n, float alpha, const float* x, float* y);
void gpu_scale(Context& context, int n, float alpha, float* x);
void gpu_set(Context& context, int n, float value, float* x);
void gpu_copy(Context& context, int n, const float* x, float* y);
// From pageable host memory: cudaMemcpyAsync stages `x` before it returns, so the caller may free it then.
void gpu_upload(Context& context, int n, const float* x, float* y);
double gpu_dot(Context& context, int n, const float* x, const float* y);
double gpu_asum(Context& context, int n, const float* x);
double gpu_sum(Context& context, int n, const float* x);

}  // namespace crema
#endif
