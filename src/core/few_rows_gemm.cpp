#include "core/few_rows_gemm.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/threads.hpp"
#include "core/vector_clones.hpp"

namespace crema {

namespace {

// The values of k each pass over A's rows covers: A's part and B's stay in the L1 cache while every row of A meets
// the rows of B in hand.
constexpr int kChunk = 512;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
// The sum of a vector's L lanes, in pairs: lane i with lane i + L/2, then i + L/4, ..., i + 1.
template <int L, typename V>
CREMA_ALWAYS_INLINE float LaneSum(const V& v) {
  float s[L];
  __builtin_memcpy(s, &v, sizeof s);
  for (int width = L / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) s[i] += s[i + width];
  return s[0];
}

// Rows m .. m + Q - 1 of A against the R rows of B in hand (the first at `b`), over k0 .. k1 - 1, into their partial
// sums: B's R vectors loaded once for the Q rows of A (R x Q sums, R + 1 more registers).
template <int L, int R, int Q>
CREMA_ALWAYS_INLINE void RowsOfA(typename Lanes<L>::Floats (*part)[kFewRows], int m, const float* A, int K,
                                 const float* b, int k0, int k1) {
  using V = typename Lanes<L>::Floats;
  V acc[Q][R];
  for (int q = 0; q < Q; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = part[r][m + q];
  for (int k = k0; k < k1; k += L) {
    V w[R];
    for (int r = 0; r < R; ++r) w[r] = Load<V>(b + static_cast<size_t>(r) * K + k);
    for (int q = 0; q < Q; ++q) {
      const V x = Load<V>(A + static_cast<size_t>(m + q) * K + k);
      for (int r = 0; r < R; ++r) acc[q][r] += x * w[r];
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int r = 0; r < R; ++r) part[r][m + q] = acc[q][r];
}

// `R` rows of B (N x K, the first at `b`) against every row of A, Q rows of A at a time: C's columns n0 .. n0 + R - 1.
template <int L, int R, int Q>
CREMA_ALWAYS_INLINE void RowsOfB(int M, int K, float alpha, const float* A, const float* b, float beta, float* C, int N,
                                 int n0) {
  using V = typename Lanes<L>::Floats;
  const int vectors_end = K - K % L;
  V part[R][kFewRows];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) part[r][m] = V{};
  for (int k0 = 0; k0 < vectors_end; k0 += kChunk) {
    const int k1 = std::min(vectors_end, k0 + kChunk);
    int m = 0;
    for (; m + Q <= M; m += Q) RowsOfA<L, R, Q>(part, m, A, K, b, k0, k1);
    for (; m < M; ++m) RowsOfA<L, R, 1>(part, m, A, K, b, k0, k1);
  }
  for (int m = 0; m < M; ++m) {
    const float* a = A + static_cast<size_t>(m) * K;
    for (int r = 0; r < R; ++r) {
      const float* w = b + static_cast<size_t>(r) * K;
      float sum = LaneSum<L>(part[r][m]);
      for (int k = vectors_end; k < K; ++k) sum += a[k] * w[k];
      float& c = C[static_cast<size_t>(m) * N + n0 + r];
      c = beta == 0.f ? alpha * sum : alpha * sum + beta * c;
    }
  }
}

// B's rows n0 .. n0 + R - 1, or those left of them at the end one at a time.
template <int L, int R, int Q>
CREMA_ALWAYS_INLINE void GroupOfB(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                  float* C, int n0) {
  const float* b = B + static_cast<size_t>(n0) * K;
  if (n0 + R <= N) {
    RowsOfB<L, R, Q>(M, K, alpha, A, b, beta, C, N, n0);
    return;
  }
  for (int n = n0; n < N; ++n, b += K) RowsOfB<L, 1, Q>(M, K, alpha, A, b, beta, C, N, n);
}

// Products of little depth (TransposedTimesFewDepth): C = alpha * A^T * B.

// A vector written to `p` (aligned to the vector's size) past the caches where `streaming`, on x86-64; else as usual.
// GCC checks an asm's operands where the function is inlined into a build for the vector unit; clang checks them
// where it is written, so clang takes its builtin (the same instructions).
template <int L, typename V>
CREMA_ALWAYS_INLINE void StoreMaybeStreaming(float* p, const V& v, bool streaming) {
#if defined(__clang__)
  if (streaming) {
    __builtin_nontemporal_store(v, reinterpret_cast<V*>(p));
    return;
  }
#elif defined(__x86_64__)
  if (streaming) {
    // The store's memory named as bytes (which alias the floats there).
    auto& bytes = *reinterpret_cast<char(*)[sizeof(V)]>(p);
    if constexpr (L == 16) {
      asm volatile("vmovntps %1, %0" : "=m"(bytes) : "v"(v));
    } else if constexpr (L == 8) {
      asm volatile("vmovntps %1, %0" : "=m"(bytes) : "x"(v));
    } else {
      asm volatile("movntps %1, %0" : "=m"(bytes) : "x"(v));
    }
    return;
  }
#endif
  (void)streaming;
  Store(p, v);
}

// Rows m .. m + Q - 1 of C over columns [n0, n1) (whole vectors): the rows' D values of A held as vectors, each vector
// of columns summed over the depth in order from B's D rows, scaled by alpha and stored.
template <int L, int D, int Q>
CREMA_ALWAYS_INLINE void DepthTile(int M, int N, float alpha, const float* A, const float* B, float* C, int m, int n0,
                                   int n1, bool streaming) {
  using V = typename Lanes<L>::Floats;
  V a[D][Q];
  for (int d = 0; d < D; ++d)
    for (int q = 0; q < Q; ++q) a[d][q] = V{} + A[static_cast<size_t>(d) * M + m + q];
  for (int n = n0; n < n1; n += L) {
    V sums[Q];
    for (int q = 0; q < Q; ++q) sums[q] = V{};
    for (int d = 0; d < D; ++d) {
      const V b = Load<V>(B + static_cast<size_t>(d) * N + n);
      for (int q = 0; q < Q; ++q) sums[q] += a[d][q] * b;
    }
    for (int q = 0; q < Q; ++q)
      StoreMaybeStreaming<L>(C + static_cast<size_t>(m + q) * N + n, alpha * sums[q], streaming);
  }
}

// C's rows [m0, m1): kChunk columns at a time (B's D rows of them stay in the L1 cache) over all the rows, four rows
// a tile; then the columns past the last whole vector.
constexpr int kDepthTileRows = 4;
template <int L, int D>
CREMA_ALWAYS_INLINE void DepthRows(int M, int N, float alpha, const float* A, const float* B, float* C, int m0, int m1,
                                   bool streaming) {
  const int vectors_end = N - N % L;
  for (int n0 = 0; n0 < vectors_end; n0 += kChunk) {
    const int n1 = std::min(vectors_end, n0 + kChunk);
    int m = m0;
    for (; m + kDepthTileRows <= m1; m += kDepthTileRows)
      DepthTile<L, D, kDepthTileRows>(M, N, alpha, A, B, C, m, n0, n1, streaming);
    for (; m < m1; ++m) DepthTile<L, D, 1>(M, N, alpha, A, B, C, m, n0, n1, streaming);
  }
  for (int m = m0; m < m1; ++m)
    for (int n = vectors_end; n < N; ++n) {
      float sum = 0.f;
      for (int d = 0; d < D; ++d) sum += A[static_cast<size_t>(d) * M + m] * B[static_cast<size_t>(d) * N + n];
      C[static_cast<size_t>(m) * N + n] = alpha * sum;
    }
}
#pragma GCC diagnostic pop

using DepthRowsOf = void (*)(int, int, float, const float*, const float*, float*, int, int, bool);
#if defined(__x86_64__)
template <int D>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void DepthAvx512(int M, int N, float alpha,
                                                                                        const float* A, const float* B,
                                                                                        float* C, int m0, int m1,
                                                                                        bool streaming) {
  DepthRows<16, D>(M, N, alpha, A, B, C, m0, m1, streaming);
}
template <int D>
__attribute__((target("avx2,fma"))) void DepthAvx2(int M, int N, float alpha, const float* A, const float* B, float* C,
                                                   int m0, int m1, bool streaming) {
  DepthRows<8, D>(M, N, alpha, A, B, C, m0, m1, streaming);
}
template <int... D>
constexpr std::array<DepthRowsOf, kFewRows> Avx512Depths(std::integer_sequence<int, D...>) {
  return {DepthAvx512<D + 1>...};
}
template <int... D>
constexpr std::array<DepthRowsOf, kFewRows> Avx2Depths(std::integer_sequence<int, D...>) {
  return {DepthAvx2<D + 1>...};
}
constexpr std::array<DepthRowsOf, kFewRows> kAvx512Depths = Avx512Depths(std::make_integer_sequence<int, kFewRows>());
constexpr std::array<DepthRowsOf, kFewRows> kAvx2Depths = Avx2Depths(std::make_integer_sequence<int, kFewRows>());
#endif
template <int D>
void DepthBaseline(int M, int N, float alpha, const float* A, const float* B, float* C, int m0, int m1,
                   bool streaming) {
  DepthRows<4, D>(M, N, alpha, A, B, C, m0, m1, streaming);
}
template <int... D>
constexpr std::array<DepthRowsOf, kFewRows> BaselineDepths(std::integer_sequence<int, D...>) {
  return {DepthBaseline<D + 1>...};
}
constexpr std::array<DepthRowsOf, kFewRows> kBaselineDepths =
    BaselineDepths(std::make_integer_sequence<int, kFewRows>());

// The tile of each build: AVX-512's 32 registers hold 6 x 4 sums, AVX2's and SSE2's 16 hold 3 x 4.
constexpr int kWideRows = 6, kNarrowRows = 3, kRowsOfA = 4;

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void GroupAvx512(int M, int N, int K,
                                                                                        float alpha, const float* A,
                                                                                        const float* B, float beta,
                                                                                        float* C, int n0) {
  GroupOfB<16, kWideRows, kRowsOfA>(M, N, K, alpha, A, B, beta, C, n0);
}
__attribute__((target("avx2,fma"))) void GroupAvx2(int M, int N, int K, float alpha, const float* A, const float* B,
                                                   float beta, float* C, int n0) {
  GroupOfB<8, kNarrowRows, kRowsOfA>(M, N, K, alpha, A, B, beta, C, n0);
}
#endif
void GroupBaseline(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C, int n0) {
  GroupOfB<4, kNarrowRows, kRowsOfA>(M, N, K, alpha, A, B, beta, C, n0);
}

using Group = void (*)(int, int, int, float, const float*, const float*, float, float*, int);

// A build: its products with few rows (and the rows of B they take at a time), its products of little depth (one a
// depth), and its floats a vector.
struct Build {
  Group group;
  int rows;
  const std::array<DepthRowsOf, kFewRows>* depths;
  int width;
};

// The build of `width` floats a vector (16, 8 or 4) where this CPU runs it, else none.
Build BuildOf(int width) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (width == 16) return avx512 ? Build{GroupAvx512, kWideRows, &kAvx512Depths, 16} : Build{};
  if (width == 8) return avx2 ? Build{GroupAvx2, kNarrowRows, &kAvx2Depths, 8} : Build{};
#endif
  return width == 4 ? Build{GroupBaseline, kNarrowRows, &kBaselineDepths, 4} : Build{};
}

// The widest build this CPU runs.
const Build& Widest() {
  static const Build widest = [] {
    Build build = BuildOf(16);
    if (build.group == nullptr) build = BuildOf(8);
    return build.group != nullptr ? build : BuildOf(4);
  }();
  return widest;
}

void Run(const Build& build, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  const int groups = (N + build.rows - 1) / build.rows;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; ++g) build.group(M, N, K, alpha, A, B, beta, C, g * build.rows);
}

// C's rows in one stretch a thread (whole tiles of rows): C = alpha * A^T * B.
void RunDepth(const Build& build, int M, int N, int K, float alpha, const float* A, const float* B, float* C) {
  const DepthRowsOf rows = (*build.depths)[K - 1];
  // Streaming stores write whole aligned vectors: every row of C starts at a vector's alignment.
  const size_t vector_bytes = sizeof(float) * build.width;
  const bool streaming = reinterpret_cast<uintptr_t>(C) % vector_bytes == 0 && N % build.width == 0;
  const int tiles = (M + kDepthTileRows - 1) / kDepthTileRows, threads = CurrentThreadCount();
  const int stretch = (tiles + threads - 1) / threads * kDepthTileRows;
  ForEachStretch(M, stretch, threads > 1, [&](long long m0, long long m1) {
    rows(M, N, alpha, A, B, C, static_cast<int>(m0), static_cast<int>(m1), streaming);
#if defined(__x86_64__)
    // Streaming stores are weakly ordered: done before the region ends, for whoever reads C next.
    if (streaming) asm volatile("sfence" ::: "memory");
#endif
  });
}

}  // namespace

bool FewRowsPay(int M, int N, int K) {
  return M > 0 && M <= kFewRows && N > 0 && K > 0 && static_cast<int64_t>(N) * K >= (int64_t{1} << 20);
}

void FewRowsTimesTransposed(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  Run(Widest(), M, N, K, alpha, A, B, beta, C);
}

bool FewRowsTimesTransposedIn(int width, int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                              float* C) {
  const Build build = BuildOf(width);
  if (build.group == nullptr) return false;
  Run(build, M, N, K, alpha, A, B, beta, C);
  return true;
}

bool FewDepthPays(int M, int N, int K) { return FewRowsPay(K, M, N); }

void TransposedTimesFewDepth(int M, int N, int K, float alpha, const float* A, const float* B, float* C) {
  RunDepth(Widest(), M, N, K, alpha, A, B, C);
}

bool TransposedTimesFewDepthIn(int width, int M, int N, int K, float alpha, const float* A, const float* B, float* C) {
  const Build build = BuildOf(width);
  if (build.group == nullptr) return false;
  RunDepth(build, M, N, K, alpha, A, B, C);
  return true;
}

}  // namespace crema
