// cpu_gemm against a product computed in double precision here, for every transpose, alpha and beta, and the
// threading policy that decides where it runs (core/threads.hpp). ctest runs this file twice in builds with
// oneDNN: as built (products on oneDNN's sgemm) and with CREMA_GEMM=openblas (products on OpenBLAS).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/context.hpp"
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

}  // namespace
}  // namespace crema
