// What a benchmark must say about the machine it ran on: the CPU, the BLAS and the speed of its matrix
// product, measured (the machines vary: Zen 3, 4 and 5 have been seen, and OpenBLAS's choice of kernels for them
// varies from run to run: docs/performance.md).
#pragma once

#include <cstddef>
#include <string>

namespace crema {

// "AMD EPYC (family 25, model 17: Zen 4), 2 cores, AVX-512" from /proc/cpuinfo; "" fields are left out.
std::string CpuDescription();
// "OpenBLAS 0.3.21 ..., kernels Cooperlake, 2 threads" when the BLAS is OpenBLAS (asked at run time, so other
// BLAS libraries link too), else "a CBLAS".
std::string BlasDescription();
// The best GFLOP/s of `repeats` single-precision n x n x n matrix products through the BLAS crema uses, after
// one untimed product: the machine's practical GEMM peak, which crema time compares each layer with.
double MeasureGemmPeakGflops(int n = 1024, int repeats = 5);
// The most memory the process has held resident so far (VmHWM in /proc/self/status), in bytes; 0 where unknown.
size_t PeakResidentBytes();

}  // namespace crema
