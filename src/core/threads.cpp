#include "core/threads.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "core/common.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace crema {

namespace {

template <typename Function>
Function* OpenBlasSymbol(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

int OpenMpThreadCount() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

bool GemmOnOneDnn() {
#ifdef CREMA_USE_ONEDNN
  static const bool on_onednn = [] {
    const char* choice = std::getenv("CREMA_GEMM");
    return choice == nullptr || std::strcmp(choice, "openblas") != 0;
  }();
  return on_onednn;
#else
  return false;
#endif
}

void ApplyThreadPolicy() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!GemmOnOneDnn() || std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
    if (auto* set_threads = OpenBlasSymbol<void(int)>("openblas_set_num_threads")) set_threads(1);
  });
}

bool SmallWork(double flops, double bytes) {
  // CREMA_SMALL_STEPS=threaded runs every step on every thread, for comparisons.
  static const bool threaded = [] {
    const char* setting = std::getenv("CREMA_SMALL_STEPS");
    return setting != nullptr && std::strcmp(setting, "threaded") == 0;
  }();
  return !threaded && flops < 1.5e6 && bytes < 512.0 * 1024;
}

int CurrentThreadCount() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

OneThreadWhile::OneThreadWhile(bool one) {
#ifdef _OPENMP
  // Inside a parallel region (a lane) this sets what oneDNN reads when it makes a primitive there.
  if (one && omp_get_max_threads() > 1) {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
#else
  (void)one;
#endif
}

OneThreadWhile::~OneThreadWhile() {
#ifdef _OPENMP
  if (saved_ > 0) omp_set_num_threads(saved_);
#endif
}

int ParallelElementThreshold() {
  static const int threshold = [] {
    if (const char* value = std::getenv("CREMA_PARALLEL_ELEMENTS")) {
      char* end = nullptr;
      const long elements = std::strtol(value, &end, 10);
      CREMA_CHECK(end != value && *end == '\0' && elements > 0 && elements <= (1L << 30))
          << "CREMA_PARALLEL_ELEMENTS=" << value << " is not a number of elements from 1 to 2^30";
      return static_cast<int>(elements);
    }
    return GemmOnOneDnn() ? 1 << 16 : 1 << 20;
  }();
  return threshold;
}

std::string ThreadPolicyDescription() {
  std::ostringstream out;
  if (GemmOnOneDnn()) {
    out << "matrix products on oneDNN's sgemm, " << OpenMpThreadCount()
        << " OpenMP threads (also oneDNN's primitives and crema's loops)";
  } else {
    out << "matrix products on the BLAS's threads, " << OpenMpThreadCount() << " OpenMP threads for crema's loops"
#ifdef CREMA_USE_ONEDNN
        << " and oneDNN's primitives"
#endif
        ;
  }
  if (auto* threads = OpenBlasSymbol<int()>("openblas_get_num_threads"))
    out << "; OpenBLAS " << threads() << (threads() == 1 ? " thread" : " threads");
  return out.str();
}

}  // namespace crema
