// cuBLAS, opened on first use instead of linked. Loading libcublas (and the half-gigabyte libcublasLt it needs)
// runs its static initialisers, about 0.6 s of every process's start on a machine without a GPU: crema --help,
// every test binary and every tool a test starts paid it whether or not a GPU product ever ran. Now only a
// process that makes a cuBLAS handle does (Context::cublas()).
#pragma once

#ifdef CREMA_USE_CUDA
#include <cublas_v2.h>

#include <string>

namespace crema {

// cublasGemmEx with a cuBLAS compute type (the header overloads the name with an older form taking a data type): the
// cast picks the overload and fails to compile where the library's declaration differs.
using CublasGemmExFunction = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                                int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);
inline constexpr CublasGemmExFunction kCublasGemmExDeclared = static_cast<CublasGemmExFunction>(&::cublasGemmEx);

// The cuBLAS entry points crema calls, resolved from one opened copy of the library. The member types are the
// header's own (cublas_v2.h maps cublasSgemm to cublasSgemm_v2, and so on), so a mismatch fails to compile.
struct CublasLibrary {
  decltype(&::cublasCreate) Create = nullptr;
  decltype(&::cublasDestroy) Destroy = nullptr;
  decltype(&::cublasSetStream) SetStream = nullptr;
  decltype(&::cublasGetStatusString) GetStatusString = nullptr;
  decltype(&::cublasSgemm) Sgemm = nullptr;
  decltype(&::cublasSgemv) Sgemv = nullptr;
  decltype(&::cublasSaxpy) Saxpy = nullptr;
  decltype(&::cublasSscal) Sscal = nullptr;
  decltype(&::cublasSdot) Sdot = nullptr;
  decltype(&::cublasSasum) Sasum = nullptr;
  CublasGemmExFunction GemmEx = nullptr;  // half-precision products (core/half_products.hpp)
  std::string path;  // the file opened, as dlopen was given it
};

// The shared library's name for the cuBLAS these sources were compiled against: libcublas.so.<major>.
std::string CublasLibraryName();

// Opens `file` (a name dlopen searches for, or a path) and resolves every entry point; throws crema::Error naming
// the file and what the loader said where it cannot be opened or lacks one. Each call opens it again (dlopen
// counts references): the process's copy is Cublas()'s.
CublasLibrary LoadCublasLibrary(const std::string& file);

// The process's cuBLAS, opened on the first call (thread-safe): $CREMA_CUBLAS_LIBRARY where set, else
// CublasLibraryName() through the loader's search (the run path, LD_LIBRARY_PATH, ldconfig's cache), then
// /usr/local/cuda/lib64. The error names every file tried.
const CublasLibrary& Cublas();

// Whether this process has cuBLAS open (for tests: a run without a GPU never opens it).
bool CublasLoaded();

}  // namespace crema
#endif
