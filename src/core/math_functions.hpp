// Dense linear algebra and vector helpers on host memory, over OpenBLAS's CBLAS. Row-major throughout.
#pragma once

#include <cstdint>

namespace crema {

enum class Transpose { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C, where op(A) is M x K and op(B) is K x N.
void cpu_gemm(Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C);
// y = alpha * op(A) * x + beta * y, A is M x N.
void cpu_gemv(Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta,
              float* y);
// y += alpha * x
void cpu_axpy(int n, float alpha, const float* x, float* y);
// y = alpha * x + beta * y
void cpu_axpby(int n, float alpha, const float* x, float beta, float* y);
void cpu_scale(int n, float alpha, float* x);
void cpu_set(int n, float value, float* x);
void cpu_copy(int n, const float* x, float* y);
float cpu_dot(int n, const float* x, const float* y);
float cpu_asum(int n, const float* x);

}  // namespace crema
