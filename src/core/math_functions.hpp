// Dense linear algebra and vector math. Row-major throughout.
//   cpu_*   on host memory, over OpenBLAS's CBLAS (layers' CPU code);
//   gpu_*   on device memory, over cuBLAS on the context's stream (gpu_math.hpp; layers' GPU code);
//   plain   on whichever device the context names, for code written once for both devices (the loss
//           weighting in Layer::Forward, the solver's update): pointers come from Blob::data_on(device).
#pragma once

#include "core/context.hpp"

namespace crema {

enum class Transpose { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C, where op(A) is M x K and op(B) is K x N.
void cpu_gemm(Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A, const float* B,
              float beta, float* C);
// y = alpha * op(A) * x + beta * y, A is M x N.
void cpu_gemv(Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta, float* y);
// y += alpha * x
void cpu_axpy(int n, float alpha, const float* x, float* y);
void cpu_scale(int n, float alpha, float* x);
void cpu_set(int n, float value, float* x);
void cpu_copy(int n, const float* x, float* y);
// Accumulated in double: losses and gradient norms are sums of many small terms.
double cpu_dot(int n, const float* x, const float* y);
// sum(|x_i|) and sum(x_i), accumulated in double in index order (so a sum of per-position terms is the same
// whether the terms were computed by a loop or by a rule).
double cpu_asum(int n, const float* x);
double cpu_sum(int n, const float* x);

// On the context's device.
void axpy(Context& context, int n, float alpha, const float* x, float* y);
void scale(Context& context, int n, float alpha, float* x);
void set(Context& context, int n, float value, float* x);
void copy(Context& context, int n, const float* x, float* y);
// n values from host memory `x` into `y` on the context's device, in stream order; `x` may be freed on return
// (lists a layer builds on the host for its GPU code: BatchReindex's and Embed's picks).
void upload(Context& context, int n, const float* x, float* y);
double dot(Context& context, int n, const float* x, const float* y);
void gemm(Context& context, Transpose trans_a, Transpose trans_b, int M, int N, int K, float alpha, const float* A,
          const float* B, float beta, float* C);
void gemv(Context& context, Transpose trans_a, int M, int N, float alpha, const float* A, const float* x, float beta,
          float* y);
double asum(Context& context, int n, const float* x);
double sum(Context& context, int n, const float* x);
// sum(x_i^2): the squared L2 norm (gradient clipping, debug_info).
double sumsq(Context& context, int n, const float* x);

}  // namespace crema
