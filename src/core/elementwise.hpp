// One place that runs a per-element rule over a range: layers and solvers state the rule once, as a small
// lambda, and this helper runs it as an OpenMP loop on the host. Its CUDA twin (elementwise.cuh, with the
// GPU kernels) launches the same rule as a kernel.
#pragma once

namespace crema {

// Below this many elements, threads cost more than they save.
constexpr int kParallelElementThreshold = 1 << 15;

template <typename Rule>
inline void for_each_element(int n, Rule rule) {
#pragma omp parallel for if (n >= kParallelElementThreshold) schedule(static)
  for (int i = 0; i < n; ++i) rule(i);
}

}  // namespace crema
