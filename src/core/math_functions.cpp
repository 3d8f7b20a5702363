#include "core/math_functions.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef CREMA_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "core/common.hpp"
#include "core/few_rows_gemm.hpp"
#include "core/gpu_math.hpp"
#include "core/threads.hpp"

namespace crema {

namespace {
CBLAS_TRANSPOSE to_cblas(Transpose t) { return t == Transpose::kYes ? CblasTrans : CblasNoTrans; }

// True when `context` runs on the GPU; throws in a CPU-only build (no context can be made so, but the
// branch must still compile).
bool OnGpu(const Context& context) {
  if (context.device() != Device::kGPU) return false;
  CREMA_CHECK(Context::built_with_cuda()) << "this crema was built without CUDA (CPU_ONLY)";
  return true;
}
}  // namespace

void cpu_gemm(Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A, const float* B,
              float beta, float* C) {
  const int lda = trans_a == Transpose::kNo ? K : M;
  const int ldb = trans_b == Transpose::kNo ? N : K;
#ifdef CREMA_USE_ONEDNN
  // On OpenMP's threads with everything else (core/threads.hpp). oneDNN's sgemm is row-major, as here.
  if (GemmOnOneDnn() && M > 0 && N > 0 && K > 0) {
    if (trans_a == Transpose::kNo && trans_b == Transpose::kYes && FewRowsPay(M, N, K)) {
      FewRowsTimesTransposed(M, N, K, alpha, A, B, beta, C);
      return;
    }
    if (trans_a == Transpose::kYes && trans_b == Transpose::kNo && beta == 0.f && FewDepthPays(M, N, K)) {
      TransposedTimesFewDepth(M, N, K, alpha, A, B, C);  // a weight gradient from a few rows, written past the caches
      return;
    }
    const char op_a = trans_a == Transpose::kNo ? 'N' : 'T', op_b = trans_b == Transpose::kNo ? 'N' : 'T';
    const dnnl_status_t status = dnnl_sgemm(op_a, op_b, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    CREMA_CHECK(status == dnnl_success) << "oneDNN's sgemm failed (status " << status << ") on a " << M << " x " << K
                                        << " by " << K << " x " << N << " product";
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

void cpu_gemv(Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta, float* y) {
#ifdef CREMA_USE_ONEDNN
  // A matrix too large for the caches (an inner product's weights at batch 1) is read on every thread, as products
  // with few rows are: y^T = x^T A^T, or x^T A (OpenBLAS keeps one thread, threads.hpp).
  if (GemmOnOneDnn() && FewRowsPay(1, M, N)) {
    if (trans_a == Transpose::kNo)
      cpu_gemm(Transpose::kNo, Transpose::kYes, 1, M, N, alpha, x, A, beta, y);
    else
      cpu_gemm(Transpose::kNo, Transpose::kNo, 1, N, M, alpha, x, A, beta, y);
    return;
  }
#endif
  cblas_sgemv(CblasRowMajor, to_cblas(trans_a), M, N, alpha, A, N, x, 1, beta, y, 1);
}

void cpu_axpy(int n, float alpha, const float* x, float* y) { cblas_saxpy(n, alpha, x, 1, y, 1); }

void cpu_scale(int n, float alpha, float* x) { cblas_sscal(n, alpha, x, 1); }

void cpu_set(int n, float value, float* x) {
  if (value == 0.f) {
    std::memset(x, 0, sizeof(float) * n);
    return;
  }
  for (int i = 0; i < n; ++i) x[i] = value;
}

void cpu_copy(int n, const float* x, float* y) {
  if (x == y) return;
  if (n < ParallelElementThreshold()) {
    std::memcpy(y, x, sizeof(float) * n);
    return;
  }
  // Large copies (a layer's input kept for backward, BatchNorm's normalized values) on every thread, in stretches of
  // 64 KB: one core alone moves less than the memory can (ResNet-50's in-place BatchNorm copies at batch 8, 360 MB a
  // pass, took 30-40 ms on one core of the 2-core Intel Xeon).
  constexpr int kStretch = 1 << 14;
  const int stretches = (n + kStretch - 1) / kStretch;
#pragma omp parallel for schedule(static)
  for (int s = 0; s < stretches; ++s) {
    const size_t first = static_cast<size_t>(s) * kStretch;
    std::memcpy(y + first, x + first, sizeof(float) * std::min<size_t>(kStretch, static_cast<size_t>(n) - first));
  }
}

double cpu_dot(int n, const float* x, const float* y) { return cblas_dsdot(n, x, 1, y, 1); }

double cpu_asum(int n, const float* x) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += std::fabs(x[i]);
  return total;
}

double cpu_sum(int n, const float* x) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += x[i];
  return total;
}

#ifdef CREMA_USE_CUDA
#define CREMA_ON_DEVICE(gpu_call, cpu_call) \
  if (OnGpu(context)) return gpu_call;      \
  return cpu_call
#else
#define CREMA_ON_DEVICE(gpu_call, cpu_call) \
  OnGpu(context);                           \
  return cpu_call
#endif

void axpy(Context& context, int n, float alpha, const float* x, float* y) {
  CREMA_ON_DEVICE(gpu_axpy(context, n, alpha, x, y), cpu_axpy(n, alpha, x, y));
}
void scale(Context& context, int n, float alpha, float* x) {
  CREMA_ON_DEVICE(gpu_scale(context, n, alpha, x), cpu_scale(n, alpha, x));
}
void set(Context& context, int n, float value, float* x) {
  CREMA_ON_DEVICE(gpu_set(context, n, value, x), cpu_set(n, value, x));
}
void copy(Context& context, int n, const float* x, float* y) {
  CREMA_ON_DEVICE(gpu_copy(context, n, x, y), cpu_copy(n, x, y));
}
void upload(Context& context, int n, const float* x, float* y) {
  CREMA_ON_DEVICE(gpu_upload(context, n, x, y), cpu_copy(n, x, y));
}
double dot(Context& context, int n, const float* x, const float* y) {
  CREMA_ON_DEVICE(gpu_dot(context, n, x, y), cpu_dot(n, x, y));
}
void gemm(Context& context, Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
          const float* B, float beta, float* C) {
  CREMA_ON_DEVICE(gpu_gemm(context, trans_a, trans_b, M, N, K, alpha, A, B, beta, C),
                  cpu_gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C));
}
void gemv(Context& context, Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta,
          float* y) {
  CREMA_ON_DEVICE(gpu_gemv(context, trans_a, M, N, alpha, A, x, beta, y),
                  cpu_gemv(trans_a, M, N, alpha, A, x, beta, y));
}
double asum(Context& context, int n, const float* x) { CREMA_ON_DEVICE(gpu_asum(context, n, x), cpu_asum(n, x)); }
double sum(Context& context, int n, const float* x) { CREMA_ON_DEVICE(gpu_sum(context, n, x), cpu_sum(n, x)); }
double sumsq(Context& context, int n, const float* x) { CREMA_ON_DEVICE(gpu_dot(context, n, x, x), cpu_dot(n, x, x)); }

}  // namespace crema
