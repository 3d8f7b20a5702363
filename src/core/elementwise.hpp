// One place that runs a per-element rule over a range, on either device. A rule is written once, as a small
// functor whose call operator is CREMA_HOST_DEVICE, in a header that both the C++ and the CUDA compiler read
// (usually its layer's header):
//
//   struct ReLUForward {
//     const float* x; float* y; float slope;
//     CREMA_HOST_DEVICE void operator()(int i) const { y[i] = x[i] > 0.f ? x[i] : slope * x[i]; }
//   };
//   for_each_element(context(), n, ReLUForward{bottom->data_on(d), top->mutable_data_on(d), slope});
//
// On the CPU it runs as an OpenMP loop (threaded from ParallelElementThreshold() elements); on the GPU as a grid-stride
// kernel on the context's stream. The GPU kernel of a rule is compiled by nvcc where the layer's .cu file says
// CREMA_GPU_ELEMENTWISE(ReLUForward); a CUDA build whose rule lacks that line fails to link, so no rule can
// silently miss its GPU half.
#pragma once

#include "core/common.hpp"
#include "core/context.hpp"
#include "core/element_type.hpp"  // CREMA_HOST_DEVICE
#include "core/threads.hpp"

namespace crema {

// Below ParallelElementThreshold() elements (src/core/threads.hpp) a loop runs on one thread.

// On the host.
template <typename Rule>
inline void for_each_element(int n, const Rule& rule) {
  // Below the threshold, no parallel region at all: even one whose `if` is false makes and frees a team (a heap
  // allocation, 1-3 us), more than a small rule's work (a softmax over 10 classes).
  if (n < ParallelElementThreshold()) {
    for (int i = 0; i < n; ++i) rule(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) rule(i);
}

#ifdef CREMA_USE_CUDA
// On the context's GPU: defined in elementwise.cuh, instantiated per rule by CREMA_GPU_ELEMENTWISE.
template <typename Rule>
void for_each_element_gpu(Context& context, int n, const Rule& rule);
#endif

// On the context's device.
template <typename Rule>
inline void for_each_element(Context& context, int n, const Rule& rule) {
  if (context.device() == Device::kGPU) {
#ifdef CREMA_USE_CUDA
    for_each_element_gpu(context, n, rule);
    return;
#else
    CREMA_FAIL() << "this crema was built without CUDA (CPU_ONLY): no rule can run on a GPU";
#endif
  }
  for_each_element(n, rule);
}

}  // namespace crema
