// One place that runs a per-element rule over a range: layers and solvers state the rule once, as a small
// lambda, and this helper runs it as an OpenMP loop on the host. Its CUDA twin (elementwise.cuh, with the
// GPU kernels) launches the same rule as a kernel.
#pragma once

namespace crema {

// Below this many elements a loop runs on one thread. The bound is high on purpose: OpenMP's threads spin for
// a while after a parallel loop, and on a small machine they then compete with OpenBLAS's own threads for the
// next GEMM. On 2 cores, LeNet's forward-backward took 44-52 ms with 2^15 here and 17 ms with no loop
// threaded (docs/performance.md); only loops big enough to amortise that are worth splitting.
constexpr int kParallelElementThreshold = 1 << 20;

template <typename Rule>
inline void for_each_element(int n, Rule rule) {
#pragma omp parallel for if (n >= kParallelElementThreshold) schedule(static)
  for (int i = 0; i < n; ++i) rule(i);
}

}  // namespace crema
