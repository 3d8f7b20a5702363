#include "core/cublas_library.hpp"

#ifdef CREMA_USE_CUDA
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "core/common.hpp"

// The name a cublas_v2.h function has in the library: the macro's expansion (cublasSgemm -> cublasSgemm_v2).
#define CREMA_CUBLAS_SYMBOL_NAME(name) CREMA_CUBLAS_SYMBOL_NAME_EXPANDED(name)
#define CREMA_CUBLAS_SYMBOL_NAME_EXPANDED(name) #name

namespace crema {

namespace {

std::atomic<bool> cublas_loaded{false};

template <typename Function>
void Resolve(void* handle, const std::string& file, const char* symbol, Function* function) {
  dlerror();
  void* address = dlsym(handle, symbol);
  const char* error = dlerror();
  if (address == nullptr || error != nullptr) {
    const std::string reason = error != nullptr ? error : "the symbol is null";
    dlclose(handle);
    CREMA_FAIL() << "cuBLAS library '" << file << "' has no " << symbol << " (" << reason
                  << "): crema was built against cuBLAS " << CUBLAS_VER_MAJOR << "." << CUBLAS_VER_MINOR;
  }
  *function = reinterpret_cast<Function>(address);
}

}  // namespace

std::string CublasLibraryName() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

CublasLibrary LoadCublasLibrary(const std::string& file) {
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    CREMA_FAIL() << "cannot open the cuBLAS library '" << file << "': " << (error != nullptr ? error : "unknown error");
  }
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
#undef CREMA_RESOLVE_CUBLAS
  // The handle stays open for the process's life: the functions above point into it.
  return library;
}

const CublasLibrary& Cublas() {
  static const CublasLibrary library = [] {
    std::vector<std::string> candidates;
    const char* chosen = std::getenv("CREMA_CUBLAS_LIBRARY");
    if (chosen != nullptr && *chosen != '\0') {
      candidates.push_back(chosen);
    } else {
      candidates.push_back(CublasLibraryName());
      candidates.push_back("/usr/local/cuda/lib64/" + CublasLibraryName());
    }
    std::string errors;
    for (const std::string& candidate : candidates) {
      try {
        CublasLibrary loaded = LoadCublasLibrary(candidate);
        cublas_loaded = true;
        return loaded;
      } catch (const Error& error) {
        errors += std::string(errors.empty() ? "" : "; ") + error.what();
      }
    }
    throw Error(errors + (chosen != nullptr && *chosen != '\0'
                              ? " (CREMA_CUBLAS_LIBRARY names it)"
                              : " (set CREMA_CUBLAS_LIBRARY to the file, or put its folder in LD_LIBRARY_PATH)"));
  }();
  return library;
}

bool CublasLoaded() { return cublas_loaded; }

}  // namespace crema
#endif
