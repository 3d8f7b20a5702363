#include "core/cublas_library.hpp"

#ifdef CREMA_USE_CUDA
#include <atomic>

#include "core/shared_library.hpp"

// The name a cublas_v2.h function has in the library: the macro's expansion (cublasSgemm -> cublasSgemm_v2).
#define CREMA_CUBLAS_SYMBOL_NAME(name) CREMA_CUBLAS_SYMBOL_NAME_EXPANDED(name)
#define CREMA_CUBLAS_SYMBOL_NAME_EXPANDED(name) #name

namespace crema {

namespace {

std::atomic<bool> cublas_loaded{false};
constexpr char kWhat[] = "the cuBLAS library";

template <typename Function>
void Resolve(void* handle, const std::string& file, const char* symbol, Function* function) {
  const std::string built =
      ": crema was built against cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR);
  *function = reinterpret_cast<Function>(SharedLibrarySymbol(handle, file, kWhat, symbol, symbol, built));
}

}  // namespace

std::string CublasLibraryName() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

CublasLibrary LoadCublasLibrary(const std::string& file) {
  void* handle = OpenSharedLibrary(file, kWhat);
  CublasLibrary library;
  library.path = file;
#define CREMA_RESOLVE_CUBLAS(member, name) Resolve(handle, file, CREMA_CUBLAS_SYMBOL_NAME(name), &library.member)
  CREMA_RESOLVE_CUBLAS(Create, cublasCreate);
  CREMA_RESOLVE_CUBLAS(Destroy, cublasDestroy);
  CREMA_RESOLVE_CUBLAS(SetStream, cublasSetStream);
  CREMA_RESOLVE_CUBLAS(GetStatusString, cublasGetStatusString);
  CREMA_RESOLVE_CUBLAS(Sgemm, cublasSgemm);
  CREMA_RESOLVE_CUBLAS(Sgemv, cublasSgemv);
  CREMA_RESOLVE_CUBLAS(Saxpy, cublasSaxpy);
  CREMA_RESOLVE_CUBLAS(Sscal, cublasSscal);
  CREMA_RESOLVE_CUBLAS(Sdot, cublasSdot);
  CREMA_RESOLVE_CUBLAS(Sasum, cublasSasum);
  CREMA_RESOLVE_CUBLAS(GemmEx, cublasGemmEx);
#undef CREMA_RESOLVE_CUBLAS
  // The handle stays open for the process's life: the functions above point into it.
  return library;
}

const CublasLibrary& Cublas() {
  static const CublasLibrary library = [] {
    const LibraryCandidates candidates =
        CandidatesFor("CREMA_CUBLAS_LIBRARY", {CublasLibraryName(), "/usr/local/cuda/lib64/" + CublasLibraryName()},
                      "(set CREMA_CUBLAS_LIBRARY to the file, or put its folder in LD_LIBRARY_PATH)");
    CublasLibrary loaded = LoadFirst(candidates, LoadCublasLibrary);
    cublas_loaded = true;
    return loaded;
  }();
  return library;
}

bool CublasLoaded() { return cublas_loaded; }

}  // namespace crema
#endif
