#include "core/cuda_check.hpp"
#include "core/elementwise.cuh"
#include "core/gpu_math.hpp"

namespace crema {

namespace {
cublasOperation_t to_cublas(Transpose t) { return t == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }
}  // namespace

// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so the
// operands swap places.
void gpu_gemm(Context& context, Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C) {
  const int lda = trans_a == Transpose::kNo ? K : M;
  const int ldb = trans_b == Transpose::kNo ? N : K;
  CREMA_CUBLAS_CHECK(Cublas().Sgemm(context.cublas(), to_cublas(trans_b), to_cublas(trans_a), N, M, K, &alpha, B, ldb,
                                    A, lda, &beta, C, N));
}

void gpu_gemm_half(Context& context, bool bfloat16, Transpose trans_a, Transpose trans_b, int M, int N, int K,
                   float alpha, const uint16_t* A, const uint16_t* B, float beta, float* C) {
  const int lda = trans_a == Transpose::kNo ? K : M;
  const int ldb = trans_b == Transpose::kNo ? N : K;
  const cudaDataType factors = bfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  // Compute type 32F: float32 sums and scaling (alpha and beta are floats); cuBLAS takes the tensor cores for 16-bit
  // factors by itself (CUBLAS_GEMM_DEFAULT).
  CREMA_CUBLAS_CHECK(Cublas().GemmEx(context.cublas(), to_cublas(trans_b), to_cublas(trans_a), N, M, K, &alpha, B,
                                     factors, ldb, A, factors, lda, &beta, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
}

void gpu_gemv(Context& context, Transpose trans_a, int M, int N, float alpha, const float* A, const float* x,
              float beta, float* y) {
  // Row-major A (M x N) is column-major A^T (N x M): flip the transposition.
  const cublasOperation_t op = trans_a == Transpose::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  CREMA_CUBLAS_CHECK(Cublas().Sgemv(context.cublas(), op, N, M, &alpha, A, N, x, 1, &beta, y, 1));
}

void gpu_axpy(Context& context, int n, float alpha, const float* x, float* y) {
  CREMA_CUBLAS_CHECK(Cublas().Saxpy(context.cublas(), n, &alpha, x, 1, y, 1));
}

void gpu_scale(Context& context, int n, float alpha, float* x) {
  CREMA_CUBLAS_CHECK(Cublas().Sscal(context.cublas(), n, &alpha, x, 1));
}

void gpu_set(Context& context, int n, float value, float* x) {
  for_each_element_gpu(context, n, [=] __device__(int i) { x[i] = value; });
}

void gpu_copy(Context& context, int n, const float* x, float* y) {
  if (x != y) CREMA_CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(float) * n, cudaMemcpyDeviceToDevice, context.stream()));
}

void gpu_upload(Context& context, int n, const float* x, float* y) {
  if (n > 0) CREMA_CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(float) * n, cudaMemcpyHostToDevice, context.stream()));
}

double gpu_dot(Context& context, int n, const float* x, const float* y) {
  float result = 0.f;
  CREMA_CUBLAS_CHECK(Cublas().Sdot(context.cublas(), n, x, 1, y, 1, &result));
  return result;
}

double gpu_asum(Context& context, int n, const float* x) {
  float result = 0.f;
  CREMA_CUBLAS_CHECK(Cublas().Sasum(context.cublas(), n, x, 1, &result));
  return result;
}

// A dot product with the context's ones: cuBLAS has no plain sum.
double gpu_sum(Context& context, int n, const float* x) {
  if (n <= 0) return 0;
  return gpu_dot(context, n, x, context.ones(n));
}

}  // namespace crema
