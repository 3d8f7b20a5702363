// Formula programs on a GPU: the CUDA source FormulaProgram::CudaSource writes, compiled when a net is set up with
// NVRTC (opened on first use, as cuBLAS is: src/core/shared_library.hpp) for the device's architecture, the PTX
// cached on disk by the source's hash ($CREMA_KERNEL_CACHE, else $XDG_CACHE_HOME/crema/kernels, else
// ~/.cache/crema/kernels; no cache where none can be written), loaded with the runtime's library calls and launched
// on the caller's stream: a kernel per pass, an element pass a thread per element, a reduction a block per value.
//
// CompileCudaToPtx needs no GPU (NVRTC compiles on the host: the tests compile every formula's source); the rest
// needs one. Not yet run on a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/formula.hpp"

namespace crema {

// PTX for `source` compiled by NVRTC for compute capability major.minor, from the disk cache where it is there.
// Throws crema::Error with NVRTC's log where it does not compile, or saying why NVRTC cannot be opened.
std::string CompileCudaToPtx(const std::string& source, int major, int minor);

// Where compiled kernels are kept ("" for nowhere).
std::string KernelCacheDirectory();

// A program's kernels (in a build without CUDA, making one is an Error).
class FormulaKernels {
 public:
  // Compiles `program`'s passes for the current device. `program` must outlive this.
  explicit FormulaKernels(const FormulaProgram& program);
  ~FormulaKernels();
  FormulaKernels(const FormulaKernels&) = delete;
  FormulaKernels& operator=(const FormulaKernels&) = delete;

  // As FormulaProgram::Run, with device pointers, queued on `stream` (a cudaStream_t).
  void Run(const std::vector<int64_t>& dims, const std::vector<const float*>& inputs,
           const std::vector<float*>& outputs, bool accumulate, void* stream);

 private:
  [[maybe_unused]] const FormulaProgram& program_;  // unused in a build without CUDA
  [[maybe_unused]] void* library_ = nullptr;        // cudaLibrary_t
  std::vector<void*> kernels_;   // cudaKernel_t, per pass
  std::vector<float*> buffers_;  // the reductions' values, on the device
  std::vector<size_t> buffer_sizes_;
};

}  // namespace crema
