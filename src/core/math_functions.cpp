#include "core/math_functions.hpp"

#include <cblas.h>

#include <cstring>

namespace crema {

namespace {
CBLAS_TRANSPOSE to_cblas(Transpose t) { return t == Transpose::kYes ? CblasTrans : CblasNoTrans; }
}  // namespace

void cpu_gemm(Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C) {
  const int lda = trans_a == Transpose::kNo ? K : M;
  const int ldb = trans_b == Transpose::kNo ? N : K;
  cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

void cpu_gemv(Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta,
              float* y) {
  cblas_sgemv(CblasRowMajor, to_cblas(trans_a), M, N, alpha, A, N, x, 1, beta, y, 1);
}

void cpu_axpy(int n, float alpha, const float* x, float* y) { cblas_saxpy(n, alpha, x, 1, y, 1); }

void cpu_axpby(int n, float alpha, const float* x, float beta, float* y) {
  cblas_sscal(n, beta, y, 1);
  cblas_saxpy(n, alpha, x, 1, y, 1);
}

void cpu_scale(int n, float alpha, float* x) { cblas_sscal(n, alpha, x, 1); }

void cpu_set(int n, float value, float* x) {
  if (value == 0.f) {
    std::memset(x, 0, sizeof(float) * n);
    return;
  }
  for (int i = 0; i < n; ++i) x[i] = value;
}

void cpu_copy(int n, const float* x, float* y) {
  if (x != y) std::memcpy(y, x, sizeof(float) * n);
}

float cpu_dot(int n, const float* x, const float* y) { return cblas_sdot(n, x, 1, y, 1); }

float cpu_asum(int n, const float* x) { return cblas_sasum(n, x, 1); }

}  // namespace crema
