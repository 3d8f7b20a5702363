// crema's one threading policy on the CPU (docs/architecture.md, "Threads"). Two thread pools on the same
// cores fight: a pool's threads spin for a while after their work (OpenBLAS's for up to about 0.1 s, OpenMP's
// for a shorter while), stealing the cores from the other pool's next piece of work. So in builds with oneDNN,
// every parallel region runs on OpenMP's threads: oneDNN's primitives, every matrix product (oneDNN's sgemm,
// called by cpu_gemm) and crema's threaded loops; OpenBLAS keeps the vector operations, on one thread.
// Measured side by side on a 2-core Zen 4, this made LeNet, CIFAR-10 quick and CaffeNet 1.2-1.8x faster than
// OpenBLAS's and OpenMP's threads side by side (docs/performance.md). Without oneDNN, products run on
// OpenBLAS's threads as before.
//
// CREMA_GEMM=openblas puts the products back on OpenBLAS, whose threads then follow OPENBLAS_NUM_THREADS (for
// comparisons); an OPENBLAS_NUM_THREADS the user set is always kept. OMP_NUM_THREADS sets OpenMP's threads.
#pragma once

#include <algorithm>
#include <string>

namespace crema {

// Runs range(begin, end) over [0, count) in stretches of `stretch` elements, split over OpenMP's threads where
// `threaded` (each stretch on one thread): a loop that keeps a stretch of its arrays in one core's caches from its
// first operation to its last (the bf16 rules' loops, the solver's update).
template <typename Range>
void ForEachStretch(long long count, long long stretch, bool threaded, const Range& range) {
  const long long stretches = (count + stretch - 1) / stretch;
#pragma omp parallel for if (threaded) schedule(static)
  for (long long s = 0; s < stretches; ++s) range(s * stretch, std::min(count, (s + 1) * stretch));
}

// Applies the policy once per process (Context's constructor calls it, before any net runs).
void ApplyThreadPolicy();
// The threads a parallel region of the calling thread takes (OpenMP's; 1 without OpenMP).
int OpenMpThreadCount();
// The threads a parallel region opened here would run on: 1 inside one (a lane: nested regions take one thread), else
// OpenMpThreadCount(). oneDNN splits a primitive's work for the threads there are when it is made, so a primitive is
// made for the threads it will run on.
int CurrentThreadCount();
// Whether cpu_gemm runs on oneDNN's sgemm (fixed for the process).
bool GemmOnOneDnn();
// From how many elements crema's own loops (elementwise rules, pooling, softmax) split over OpenMP's threads.
// OpenMP's threads spin for a while after a parallel loop; where products run on OpenBLAS's threads (builds
// without oneDNN, or CREMA_GEMM=openblas), they then compete with OpenBLAS's for the next product, so only
// loops of 2^20 elements or more are threaded (LeNet took 44-52 ms per pass with 2^15 and 17 ms with no loop
// threaded, docs/performance.md). With every parallel region on OpenMP's one pool nothing competes, and loops
// from THRESHOLD elements on are split (measured, docs/performance.md). CREMA_PARALLEL_ELEMENTS=N overrides it.
int ParallelElementThreshold();
// Whether a step of `flops` arithmetic over `bytes` of memory (its inputs, outputs and weights) is small enough
// to run on one thread: under about a megaflop over data that fits a core's L2 cache. A second core costs
// microseconds to wake and to fetch what the first wrote; a small step's whole work is that much (LeNet at batch 1:
// its poolings took 8-12 us on two threads against 2 on one, docs/performance.md). CREMA_SMALL_STEPS=threaded:
// never (for comparisons).
bool SmallWork(double flops, double bytes);

// While it lives, the calling thread's parallel regions (OpenMP's, so oneDNN's primitives too, made or run) take one
// thread, where `one` is true; nothing changes otherwise. Inside a parallel region it makes what oneDNN reads when it
// makes a primitive there one thread, as the primitive will run.
class OneThreadWhile {
 public:
  explicit OneThreadWhile(bool one);
  ~OneThreadWhile();
  OneThreadWhile(const OneThreadWhile&) = delete;
  OneThreadWhile& operator=(const OneThreadWhile&) = delete;

 private:
  int saved_ = 0;  // the threads before (0: left alone)
};

// What runs where: "matrix products on oneDNN's sgemm, 2 OpenMP threads (also oneDNN's primitives and
// crema's loops); OpenBLAS 1 thread", for crema time.
std::string ThreadPolicyDescription();

}  // namespace crema
