#include "core/few_rows_gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/vector_clones.hpp"

namespace crema {

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
// 16 floats: one AVX-512 register, two AVX2 ones, four SSE2 ones, as each clone compiles it (core/vector_clones.hpp).
typedef float Floats __attribute__((vector_size(64)));
constexpr int kLanes = 16;

// Rows of B read together (each a stream from memory; their partial sums with two rows of A are 16 vector
// registers), and the values of k each pass over A's rows covers (A's part and B's stay in the L1 cache).
constexpr int kTransposedRows = 8;
constexpr int kTransposedChunk = 512;

CREMA_ALWAYS_INLINE Floats Load(const float* p) {
  Floats v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// The sum of a vector's lanes, in pairs: lane i with lane i + 8, then i + 4, i + 2, i + 1.
CREMA_ALWAYS_INLINE float LaneSum(const Floats& v) {
  float s[kLanes];
  __builtin_memcpy(s, &v, sizeof s);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) s[i] += s[i + width];
  return s[0];
}

// `R` rows of B (N x K, the first at `b`), against every row of A: C's columns n0 .. n0 + R - 1.
template <int R>
CREMA_ALWAYS_INLINE void TransposedRows(int M, int K, float alpha, const float* A, const float* b, float beta, float* C,
                                        int N, int n0) {
  const int vectors_end = K - K % kLanes;
  Floats part[R][kFewRows];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) part[r][m] = Floats{};
  for (int k0 = 0; k0 < vectors_end; k0 += kTransposedChunk) {
    const int k1 = std::min(vectors_end, k0 + kTransposedChunk);
    int m = 0;
    for (; m + 2 <= M; m += 2) {  // two rows of A at a time
      const float* a0 = A + static_cast<size_t>(m) * K;
      const float* a1 = a0 + K;
      Floats acc0[R], acc1[R];
      for (int r = 0; r < R; ++r) {
        acc0[r] = part[r][m];
        acc1[r] = part[r][m + 1];
      }
      for (int k = k0; k < k1; k += kLanes) {
        const Floats x0 = Load(a0 + k), x1 = Load(a1 + k);
        for (int r = 0; r < R; ++r) {
          const Floats w = Load(b + static_cast<size_t>(r) * K + k);
          acc0[r] += x0 * w;
          acc1[r] += x1 * w;
        }
      }
      for (int r = 0; r < R; ++r) {
        part[r][m] = acc0[r];
        part[r][m + 1] = acc1[r];
      }
    }
    if (m < M) {
      const float* a0 = A + static_cast<size_t>(m) * K;
      Floats acc0[R];
      for (int r = 0; r < R; ++r) acc0[r] = part[r][m];
      for (int k = k0; k < k1; k += kLanes) {
        const Floats x0 = Load(a0 + k);
        for (int r = 0; r < R; ++r) acc0[r] += x0 * Load(b + static_cast<size_t>(r) * K + k);
      }
      for (int r = 0; r < R; ++r) part[r][m] = acc0[r];
    }
  }
  for (int m = 0; m < M; ++m) {
    const float* a = A + static_cast<size_t>(m) * K;
    for (int r = 0; r < R; ++r) {
      const float* w = b + static_cast<size_t>(r) * K;
      float sum = LaneSum(part[r][m]);
      for (int k = vectors_end; k < K; ++k) sum += a[k] * w[k];
      float& c = C[static_cast<size_t>(m) * N + n0 + r];
      c = beta == 0.f ? alpha * sum : alpha * sum + beta * c;
    }
  }
}

#pragma GCC diagnostic pop

CREMA_VECTOR_CLONES void TransposedGroup(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                         float* C, int n0) {
  const float* b = B + static_cast<size_t>(n0) * K;
  if (n0 + kTransposedRows <= N) {
    TransposedRows<kTransposedRows>(M, K, alpha, A, b, beta, C, N, n0);
    return;
  }
  for (int n = n0; n < N; ++n, b += K) TransposedRows<1>(M, K, alpha, A, b, beta, C, N, n);
}

}  // namespace

bool FewRowsPay(int M, int N, int K) {
  return M > 0 && M <= kFewRows && N > 0 && K > 0 && static_cast<int64_t>(N) * K >= (int64_t{1} << 20);
}

void FewRowsTimesTransposed(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  const int groups = (N + kTransposedRows - 1) / kTransposedRows;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; ++g) TransposedGroup(M, N, K, alpha, A, B, beta, C, g * kTransposedRows);
}

}  // namespace crema
