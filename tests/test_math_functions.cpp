// cpu_gemm against a product computed in double precision here, for every transpose, alpha and beta, and the
// threading policy that decides where it runs (core/threads.hpp). ctest runs this file twice in builds with
// oneDNN: as built (products on oneDNN's sgemm) and with CREMA_GEMM=openblas (products on OpenBLAS).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/channel_sums.hpp"
#include "core/context.hpp"
#include "core/few_rows_gemm.hpp"
#include "core/math_functions.hpp"
#include "core/random.hpp"
#include "core/threads.hpp"

namespace crema {
namespace {

std::vector<float> Random(size_t count, uint64_t seed) {
  RandomStream random(seed);
  std::vector<float> values(count);
  for (float& v : values) v = random.Uniform(-1.f, 1.f);
  return values;
}

TEST(CpuGemmTest, MatchesADoubleProductForEveryTransposeAndScale) {
  struct Shape {
    int M, N, K;
  };
  // Odd sizes, vectors, and products large enough for the libraries' blocked and threaded paths.
  const Shape shapes[] = {{1, 1, 1}, {3, 5, 4}, {7, 1, 9}, {1, 13, 6}, {64, 50, 500}, {130, 97, 65}};
  const Transpose both[] = {Transpose::kNo, Transpose::kYes};
  uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (Transpose ta : both)
      for (Transpose tb : both)
        for (const auto& [alpha, beta] : {std::pair<float, float>{1.f, 0.f}, {0.5f, 1.f}, {-2.f, 0.25f}}) {
          SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + " ta " +
                       std::to_string(ta == Transpose::kYes) + " tb " + std::to_string(tb == Transpose::kYes) +
                       " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
          const std::vector<float> a = Random(static_cast<size_t>(s.M) * s.K, seed++);
          const std::vector<float> b = Random(static_cast<size_t>(s.K) * s.N, seed++);
          std::vector<float> c = Random(static_cast<size_t>(s.M) * s.N, seed++);
          const std::vector<float> c0 = c;
          cpu_gemm(ta, tb, s.M, s.N, s.K, alpha, a.data(), b.data(), beta, c.data());
          for (int i = 0; i < s.M; ++i)
            for (int j = 0; j < s.N; ++j) {
              double sum = 0;
              for (int k = 0; k < s.K; ++k) {
                const double x = ta == Transpose::kNo ? a[i * s.K + k] : a[k * s.M + i];
                const double y = tb == Transpose::kNo ? b[k * s.N + j] : b[j * s.K + k];
                sum += x * y;
              }
              const double expected = alpha * sum + beta * c0[i * s.N + j];
              ASSERT_NEAR(c[i * s.N + j], expected, 1e-5 * (s.K + 1)) << "at " << i << ", " << j;
            }
        }
}

TEST(CpuGemmTest, ProductsRunWhereThePolicySays) {
  Context context;  // applies the policy
  const char* choice = std::getenv("CREMA_GEMM");
#ifdef CREMA_USE_ONEDNN
  EXPECT_EQ(GemmOnOneDnn(), choice == nullptr || std::string(choice) != "openblas");
#else
  EXPECT_FALSE(GemmOnOneDnn());
#endif
  const std::string description = ThreadPolicyDescription();
  EXPECT_NE(description.find(GemmOnOneDnn() ? "oneDNN's sgemm" : "the BLAS's threads"), std::string::npos)
      << description;
  // With products on oneDNN, OpenBLAS keeps one thread unless the user set its count.
  auto* threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (GemmOnOneDnn() && threads != nullptr && std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    EXPECT_EQ(threads(), 1);
    EXPECT_NE(description.find("OpenBLAS 1 thread"), std::string::npos) << description;
  }
}

// Small steps run on one thread and the thread count comes back after; a nested scope, or one told no, changes nothing.
TEST(ThreadPolicyTest, OneThreadWhileLimitsTheScopeOnly) {
  const int before = omp_get_max_threads();
  {
    OneThreadWhile one(true);
    EXPECT_EQ(omp_get_max_threads(), 1);
    {
      OneThreadWhile nested(true);
      EXPECT_EQ(omp_get_max_threads(), 1);
    }
    EXPECT_EQ(omp_get_max_threads(), 1);
    int threads_seen = 0;
#pragma omp parallel
    {
#pragma omp atomic
      ++threads_seen;
    }
    EXPECT_EQ(threads_seen, 1);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  {
    OneThreadWhile none(false);
    EXPECT_EQ(omp_get_max_threads(), before);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  // LeNet's steps at batch 1 are small; its conv2 at batch 64, or a 1.6 MB weight matrix, are not.
  EXPECT_TRUE(SmallWork(0.59e6, 50e3));
  EXPECT_FALSE(SmallWork(3.2e6 * 64, 2e6));
  EXPECT_FALSE(SmallWork(0.8e6, 1.6e6));
}

// cpu_copy splits a copy above the loop threshold over the threads in stretches: every value arrives, the last
// stretch's partial one too, and nothing past the end is written; below it, and onto itself, it copies as memcpy does.
TEST(CpuCopyTest, CopiesEveryValueOnEveryThreadCount) {
  for (int n : {1, 1000, ParallelElementThreshold() - 1, ParallelElementThreshold(), 5 * 16384 + 7, 1 << 20}) {
    std::vector<float> from(n), to(n + 1, -1.f);
    for (int i = 0; i < n; ++i) from[i] = static_cast<float>(i) * 0.5f + 1.f;
    cpu_copy(n, from.data(), to.data());
    for (int i = 0; i < n; ++i) ASSERT_EQ(to[i], from[i]) << n << " at " << i;
    EXPECT_EQ(to[n], -1.f) << n;
    cpu_copy(n, to.data(), to.data());
    EXPECT_EQ(to[n - 1], from[n - 1]) << n;
  }
}

// Three terms of element j of channel c, each telling the index and channel apart: what sum_per_channel adds.
struct IndexedTerms {
  static constexpr int kTerms = 3;
  const float* x;
  const float* y;
  int channels, inner;
  void operator()(int j, int c, float* terms) const {
    terms[0] = x[j];
    terms[1] = x[j] * y[j];
    // Which channel the element belongs to, by its index: the rule is handed the channel the index lies in.
    terms[2] = c == j / inner % channels ? 1.f : 1000.f;
  }
};

// sum_per_channel on the host, against sums in double here: every channel and term, alpha scaling them, one element
// per channel, empty channels (0 outer or inner values), one channel, inner 1 (channels last); the same bits on one
// thread as on all.
TEST(ChannelSumsTest, MatchDoubleSumsTheSameOnEveryThreadCount) {
  struct Shape {
    int outer, channels, inner;
  };
  const Shape shapes[] = {{1, 1, 1},    {2, 3, 5},    {0, 4, 7},     {5, 4, 0},   {7, 1, 9000},
                          {64, 16, 49}, {3, 2048, 1}, {8, 64, 3136}, {1, 33, 513}};
  uint64_t seed = 300;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(std::to_string(s.outer) + " x " + std::to_string(s.channels) + " x " + std::to_string(s.inner));
    const size_t count = static_cast<size_t>(s.outer) * s.channels * s.inner;
    const std::vector<float> x = Random(count, ++seed), y = Random(count, ++seed);
    const IndexedTerms rule{x.data(), y.data(), s.channels, s.inner};
    const float alpha = 0.75f;
    std::vector<float> sums(3 * s.channels, -7.f), one_thread(3 * s.channels, -7.f);
    sum_per_channel(s.outer, s.channels, s.inner, rule, alpha, sums.data());
    {
      OneThreadWhile single(true);
      sum_per_channel(s.outer, s.channels, s.inner, rule, alpha, one_thread.data());
    }
    for (int c = 0; c < s.channels; ++c) {
      double sum = 0, product = 0;
      for (int o = 0; o < s.outer; ++o)
        for (int i = 0; i < s.inner; ++i) {
          const size_t j = (static_cast<size_t>(o) * s.channels + c) * s.inner + i;
          sum += x[j];
          product += static_cast<double>(x[j] * y[j]);
        }
      // Summed in double and rounded once, then scaled: within two roundings of the value.
      const double u = std::numeric_limits<float>::epsilon();
      EXPECT_NEAR(sums[c], alpha * sum, u * (std::fabs(alpha * sum) + 1e-30)) << "channel " << c;
      EXPECT_NEAR(sums[s.channels + c], alpha * product, u * (std::fabs(alpha * product) + 1e-30)) << "channel " << c;
      EXPECT_EQ(sums[2 * s.channels + c], alpha * static_cast<float>(s.outer * s.inner)) << "channel " << c;
    }
    EXPECT_EQ(sums, one_thread);
  }
  // The GPU's partial sums: one block a channel up to 4096 values, at most 64 blocks.
  EXPECT_EQ(SumPerChannelScratch(8, 64, 512, 2), 0u);
  EXPECT_EQ(SumPerChannelScratch(8, 64, 513, 2), 2u * 64 * 2);
  EXPECT_EQ(SumPerChannelScratch(64, 64, 3136, 2), 2u * 64 * 49);
  EXPECT_EQ(SumPerChannelScratch(1000, 3, 100000, 1), 3u * 64);
}

// C = alpha * A * B^T + beta * C with B of N x K, in double here, and the bound on a float sum of K products with
// its scaling: (K + 2) units of roundoff of the magnitudes summed.
void ExpectTransposedProduct(int M, int N, int K, float alpha, const std::vector<float>& a, const std::vector<float>& b,
                             float beta, const std::vector<float>& c0, const std::vector<float>& c) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0, magnitude = 0;
      for (int k = 0; k < K; ++k) {
        const double product =
            static_cast<double>(a[static_cast<size_t>(i) * K + k]) * b[static_cast<size_t>(j) * K + k];
        sum += product;
        magnitude += std::fabs(product);
      }
      const double old = beta == 0.f ? 0. : static_cast<double>(beta) * c0[static_cast<size_t>(i) * N + j];
      const double expected = alpha * sum + old;
      const double bound = (K + 2) * u * (std::fabs(alpha) * magnitude + std::fabs(old)) + 1e-30;
      ASSERT_NEAR(c[static_cast<size_t>(i) * N + j], expected, bound) << "at " << i << ", " << j;
    }
}

// The few-rows product (an inner product at a small batch against large weights): against a double product for 1 to
// 16 rows, sizes off its vectors and row groups, alpha and beta, with beta 0 writing over NaN; the same bits on one
// thread as on all; and cpu_gemm and cpu_gemv take it where FewRowsPay says, with results as exact.
TEST(FewRowsTest, MatchesADoubleProductTheSameOnEveryThreadCount) {
  struct Shape {
    int M, N, K;
  };
  const Shape shapes[] = {{1, 1, 1}, {5, 13, 37}, {2, 9, 16}, {3, 1030, 1031}, {10, 264, 4099}, {16, 40, 2048}};
  uint64_t seed = 100;
  for (const Shape& s : shapes)
    for (const auto& [alpha, beta] : {std::pair<float, float>{1.f, 0.f}, {-0.5f, 1.f}, {2.f, 0.25f}}) {
      SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + " alpha " +
                   std::to_string(alpha) + " beta " + std::to_string(beta));
      const std::vector<float> a = Random(static_cast<size_t>(s.M) * s.K, seed++);
      const std::vector<float> b = Random(static_cast<size_t>(s.N) * s.K, seed++);
      std::vector<float> c0 = Random(static_cast<size_t>(s.M) * s.N, seed++);
      if (beta == 0.f) c0.assign(c0.size(), std::numeric_limits<float>::quiet_NaN());  // not read
      std::vector<float> all = c0, one = c0;
      FewRowsTimesTransposed(s.M, s.N, s.K, alpha, a.data(), b.data(), beta, all.data());
      {
        OneThreadWhile single(true);
        FewRowsTimesTransposed(s.M, s.N, s.K, alpha, a.data(), b.data(), beta, one.data());
      }
      ExpectTransposedProduct(s.M, s.N, s.K, alpha, a, b, beta, c0, all);
      for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], one[i]) << "at " << i;
      // Each build this CPU runs (the one above is the widest), SSE2's on every x86-64.
      for (int width : {16, 8, 4}) {
        std::vector<float> c = c0;
        if (!FewRowsTimesTransposedIn(width, s.M, s.N, s.K, alpha, a.data(), b.data(), beta, c.data())) continue;
        SCOPED_TRACE("vectors of " + std::to_string(width));
        ExpectTransposedProduct(s.M, s.N, s.K, alpha, a, b, beta, c0, c);
      }
    }
  float two = 2.f, product = 0.f;
  EXPECT_TRUE(FewRowsTimesTransposedIn(4, 1, 1, 1, 1.f, &two, &two, 0.f, &product));
  EXPECT_EQ(product, 4.f);
  EXPECT_FALSE(FewRowsTimesTransposedIn(32, 1, 1, 1, 1.f, &two, &two, 0.f, &product));
  EXPECT_TRUE(FewRowsPay(10, 4096, 9216));  // CaffeNet's fc6 at batch 10
  EXPECT_TRUE(FewRowsPay(kFewRows, 1024, 1024));
  EXPECT_FALSE(FewRowsPay(kFewRows + 1, 4096, 9216));
  EXPECT_FALSE(FewRowsPay(64, 500, 800));  // LeNet's ip1
  EXPECT_FALSE(FewRowsPay(10, 1000, 1000));

  // Through cpu_gemm (A times B transposed) and cpu_gemv (both ways) at sizes where FewRowsPay holds.
  const int M = 7, N = 1100, K = 1000;
  ASSERT_TRUE(FewRowsPay(M, N, K));
  const std::vector<float> a = Random(static_cast<size_t>(M) * K, 7), b = Random(static_cast<size_t>(N) * K, 8);
  const std::vector<float> c0 = Random(static_cast<size_t>(M) * N, 9);
  std::vector<float> c = c0;
  cpu_gemm(Transpose::kNo, Transpose::kYes, M, N, K, 0.5f, a.data(), b.data(), 2.f, c.data());
  ExpectTransposedProduct(M, N, K, 0.5f, a, b, 2.f, c0, c);
  // y = B x (B is N x K): a one-row product against B; y = B^T z: against B's transpose.
  const std::vector<float> x(a.begin(), a.begin() + K), z = Random(N, 10);
  std::vector<float> y(N, std::numeric_limits<float>::quiet_NaN());
  cpu_gemv(Transpose::kNo, N, K, 1.f, b.data(), x.data(), 0.f, y.data());
  ExpectTransposedProduct(1, N, K, 1.f, x, b, 0.f, std::vector<float>(N), y);
  std::vector<float> w(K, 1.f);
  cpu_gemv(Transpose::kYes, N, K, -1.f, b.data(), z.data(), 0.5f, w.data());
  for (int k = 0; k < K; ++k) {
    double sum = 0, magnitude = 0;
    for (int n = 0; n < N; ++n) {
      sum += static_cast<double>(b[static_cast<size_t>(n) * K + k]) * z[n];
      magnitude += std::fabs(static_cast<double>(b[static_cast<size_t>(n) * K + k]) * z[n]);
    }
    ASSERT_NEAR(w[k], 0.5 - sum, (N + 2) * std::numeric_limits<float>::epsilon() * (magnitude + 0.5)) << "at " << k;
  }
}

// A rows x cols matrix's transpose (cols x rows), row-major.
std::vector<float> Transposed(int rows, int cols, const std::vector<float>& m) {
  std::vector<float> t(m.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[static_cast<size_t>(c) * rows + r] = m[static_cast<size_t>(r) * cols + c];
  return t;
}

// The product of little depth (an inner product's weight gradient from a few rows): C = alpha * A^T * B against a
// double product for depths 1 to 16, sizes off its vectors and tiles of rows, C aligned for the streaming stores and
// not (a float past the alignment); C written over NaN, not read; the same bits on one thread as on all and in every
// build this CPU runs; and cpu_gemm takes it for a transposed A, beta 0 and FewDepthPays.
TEST(FewRowsTest, TransposedTimesFewDepthMatchesADoubleProductStreamedOrNot) {
  struct Shape {
    int M, N, K;
  };
  const Shape shapes[] = {{1, 1, 1}, {5, 13, 3}, {37, 64, 10}, {9, 1030, 16}, {4, 48, 7}, {130, 528, 2}, {6, 80, 1}};
  uint64_t seed = 300;
  // A buffer for C with `offset` floats past a 64-byte boundary.
  const auto place = [](std::vector<float>* buffer, size_t count, int offset) {
    buffer->assign(count + 32, std::numeric_limits<float>::quiet_NaN());
    const uintptr_t start = (reinterpret_cast<uintptr_t>(buffer->data()) + 63) / 64 * 64;
    return reinterpret_cast<float*>(start) + offset;
  };
  for (const Shape& s : shapes)
    for (const float alpha : {1.f, -0.75f})
      for (const int offset : {0, 1}) {
        SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + " from depth " + std::to_string(s.K) +
                     " alpha " + std::to_string(alpha) + (offset ? ", C off its alignment" : ", C aligned"));
        const size_t count = static_cast<size_t>(s.M) * s.N;
        const std::vector<float> a = Random(static_cast<size_t>(s.K) * s.M, seed++);  // K x M
        const std::vector<float> b = Random(static_cast<size_t>(s.K) * s.N, seed++);  // K x N
        // As ExpectTransposedProduct reads them: A^T (M x K) and B^T (N x K).
        const std::vector<float> at = Transposed(s.K, s.M, a), bt = Transposed(s.K, s.N, b);
        std::vector<float> all_buffer, one_buffer;
        float* all = place(&all_buffer, count, offset);
        float* one = place(&one_buffer, count, offset);
        TransposedTimesFewDepth(s.M, s.N, s.K, alpha, a.data(), b.data(), all);
        {
          OneThreadWhile single(true);
          TransposedTimesFewDepth(s.M, s.N, s.K, alpha, a.data(), b.data(), one);
        }
        const std::vector<float> zeros(count), result(all, all + count);
        ExpectTransposedProduct(s.M, s.N, s.K, alpha, at, bt, 0.f, zeros, result);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[i], one[i]) << "at " << i;
        for (int width : {16, 8, 4}) {
          std::vector<float> buffer;
          float* c = place(&buffer, count, offset);
          if (!TransposedTimesFewDepthIn(width, s.M, s.N, s.K, alpha, a.data(), b.data(), c)) continue;
          SCOPED_TRACE("vectors of " + std::to_string(width));
          ExpectTransposedProduct(s.M, s.N, s.K, alpha, at, bt, 0.f, zeros, std::vector<float>(c, c + count));
        }
      }
  EXPECT_TRUE(FewDepthPays(4096, 9216, 10));  // CaffeNet's fc6 weight gradient at batch 10
  EXPECT_FALSE(FewDepthPays(4096, 9216, kFewRows + 1));
  EXPECT_FALSE(FewDepthPays(500, 800, 64));  // LeNet's ip1 at batch 64

  // Through cpu_gemm: C = A^T B with A K x M, at a size where FewDepthPays holds, beside the same product by
  // TransposedTimesFewDepth (the same bits) and against the double product.
  const int M = 1030, N = 1024, K = 5;
  ASSERT_TRUE(FewDepthPays(M, N, K));
  const std::vector<float> a = Random(static_cast<size_t>(K) * M, 20), b = Random(static_cast<size_t>(K) * N, 21);
  std::vector<float> c(static_cast<size_t>(M) * N, std::numeric_limits<float>::quiet_NaN()), direct = c;
  cpu_gemm(Transpose::kYes, Transpose::kNo, M, N, K, 2.f, a.data(), b.data(), 0.f, c.data());
  TransposedTimesFewDepth(M, N, K, 2.f, a.data(), b.data(), direct.data());
  if (GemmOnOneDnn()) {
    for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], direct[i]) << "at " << i;
  }
  ExpectTransposedProduct(M, N, K, 2.f, Transposed(K, M, a), Transposed(K, N, b), 0.f, std::vector<float>(c.size()), c);
}

}  // namespace
}  // namespace crema
