#include "core/formula_gpu.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <type_traits>

#ifdef CREMA_USE_CUDA
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "core/cuda_check.hpp"
#include "core/shared_library.hpp"
#endif

namespace crema {

std::string KernelCacheDirectory() {
  if (const char* set = std::getenv("CREMA_KERNEL_CACHE")) return set;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return std::string(cache) + "/crema/kernels";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/crema/kernels";
  return "";
}

#ifndef CREMA_USE_CUDA
std::string CompileCudaToPtx(const std::string&, int, int) {
  throw Error("crema was built without CUDA: no kernels are compiled");
}

FormulaKernels::FormulaKernels(const FormulaProgram& program) : program_(program) {
  throw Error("crema was built without CUDA: no kernels are made");
}

FormulaKernels::~FormulaKernels() = default;

void FormulaKernels::Run(const std::vector<int64_t>&, const std::vector<const float*>&, const std::vector<float*>&,
                         bool, void*) {
  throw Error("crema was built without CUDA: no kernels run");
}
#else

namespace {

// NVRTC's entry points, from one opened copy of the library.
struct Nvrtc {
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  int major = 0, minor = 0;
};

const Nvrtc& OpenNvrtc() {
  static const Nvrtc nvrtc = [] {
    const std::string name = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
    const LibraryCandidates candidates =
        CandidatesFor("CREMA_NVRTC_LIBRARY", {name, "/usr/local/cuda/lib64/" + name},
                      "(set CREMA_NVRTC_LIBRARY to the file, or put its folder in LD_LIBRARY_PATH)");
    return LoadFirst(candidates, [](const std::string& file) {
      constexpr char kWhat[] = "the NVRTC library";
      void* handle = OpenSharedLibrary(file, kWhat);
      Nvrtc loaded;
      const auto resolve = [&](const char* symbol, auto* function) {
        *function = reinterpret_cast<std::remove_pointer_t<decltype(function)>>(
            SharedLibrarySymbol(handle, file, kWhat, symbol, symbol, ""));
      };
      resolve("nvrtcVersion", &loaded.Version);
      resolve("nvrtcGetErrorString", &loaded.GetErrorString);
      resolve("nvrtcCreateProgram", &loaded.CreateProgram);
      resolve("nvrtcCompileProgram", &loaded.CompileProgram);
      resolve("nvrtcGetProgramLogSize", &loaded.GetProgramLogSize);
      resolve("nvrtcGetProgramLog", &loaded.GetProgramLog);
      resolve("nvrtcGetPTXSize", &loaded.GetPTXSize);
      resolve("nvrtcGetPTX", &loaded.GetPTX);
      resolve("nvrtcDestroyProgram", &loaded.DestroyProgram);
      loaded.Version(&loaded.major, &loaded.minor);
      return loaded;
    });
  }();
  return nvrtc;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// Creates `path` and its parents; false where it cannot.
bool MakeDirectories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at < path.size() && path[at] != '/') continue;
    const std::string part = path.substr(0, at);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

std::string CompileCudaToPtx(const std::string& source, int major, int minor) {
  const Nvrtc& nvrtc = OpenNvrtc();
  const std::string arch = "--gpu-architecture=compute_" + std::to_string(major * 10 + minor);
  const std::string key =
      source + "\n// " + arch + " nvrtc " + std::to_string(nvrtc.major) + "." + std::to_string(nvrtc.minor);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(Fnv1a(key)));
  const std::string folder = KernelCacheDirectory();
  const std::string cached = folder.empty() ? "" : folder + "/formula-" + hash + ".ptx";
  if (!cached.empty()) {
    std::ifstream in(cached, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      // The key is written after the PTX's end: a hash collision or a torn file is compiled again.
      const std::string whole = text.str();
      const size_t end = whole.find('\0');
      if (end != std::string::npos && whole.compare(end + 1, std::string::npos, key) == 0) return whole.substr(0, end);
    }
  }
  nvrtcProgram program = nullptr;
  const auto check = [&](nvrtcResult result, const char* what) {
    if (result != NVRTC_SUCCESS) throw Error(std::string("NVRTC ") + what + ": " + nvrtc.GetErrorString(result));
  };
  check(nvrtc.CreateProgram(&program, source.c_str(), "formula.cu", 0, nullptr, nullptr), "cannot create a program");
  const char* options[] = {arch.c_str(), "--std=c++17"};  // fast math stays off (NVRTC's default)
  const nvrtcResult compiled = nvrtc.CompileProgram(program, static_cast<int>(std::size(options)), options);
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtc.GetProgramLogSize(program, &size);
    std::string log(size, '\0');
    nvrtc.GetProgramLog(program, log.data());
    nvrtc.DestroyProgram(&program);
    throw Error(std::string("NVRTC cannot compile a formula's kernels (") + nvrtc.GetErrorString(compiled) +
                "): " + log.c_str());
  }
  size_t size = 0;
  check(nvrtc.GetPTXSize(program, &size), "has no PTX size");
  std::string ptx(size, '\0');
  check(nvrtc.GetPTX(program, ptx.data()), "has no PTX");
  nvrtc.DestroyProgram(&program);
  ptx.resize(std::strlen(ptx.c_str()));
  // Kept for the next process: written aside and renamed, so that a reader sees all of it or nothing.
  if (!cached.empty() && MakeDirectories(folder)) {
    const std::string temporary = cached + "." + std::to_string(getpid()) + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary);
      out << ptx << '\0' << key;
    }
    if (std::rename(temporary.c_str(), cached.c_str()) != 0) std::remove(temporary.c_str());
  }
  return ptx;
}

FormulaKernels::FormulaKernels(const FormulaProgram& program) : program_(program) {
  int device = 0;
  CREMA_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties;
  CREMA_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  const std::string ptx = CompileCudaToPtx(program.CudaSource("crema_formula"), properties.major, properties.minor);
  cudaLibrary_t library = nullptr;
  CREMA_CUDA_CHECK(cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  library_ = library;
  for (size_t p = 0; p < program.passes_.size(); ++p) {
    cudaKernel_t kernel = nullptr;
    CREMA_CUDA_CHECK(cudaLibraryGetKernel(&kernel, library, ("crema_formula_" + std::to_string(p)).c_str()));
    kernels_.push_back(reinterpret_cast<void*>(kernel));
  }
  buffers_.assign(program.buffer_axes_.size(), nullptr);
  buffer_sizes_.assign(program.buffer_axes_.size(), 0);
}

FormulaKernels::~FormulaKernels() {
  for (float* buffer : buffers_)
    if (buffer != nullptr) cudaFree(buffer);
  if (library_ != nullptr) cudaLibraryUnload(static_cast<cudaLibrary_t>(library_));
}

namespace {

// FormulaKernelArgs as FormulaProgram::CudaSource declares it.
struct KernelArgs {
  long long total, reduced, values;
  int rank, accumulate;
  long long sizes[kFormulaMostAxes];
  const float* leaves[FormulaProgram::kFormulaKernelLeaves];
  long long strides[FormulaProgram::kFormulaKernelLeaves][kFormulaMostAxes];
  int straight[FormulaProgram::kFormulaKernelLeaves];
  float* outputs[FormulaProgram::kFormulaKernelOutputs];
  float counts[FormulaProgram::kFormulaKernelCounts];
};

}  // namespace

void FormulaKernels::Run(const std::vector<int64_t>& dims, const std::vector<const float*>& inputs,
                         const std::vector<float*>& outputs, bool accumulate, void* stream) {
  // The reductions' buffers, grown to this run's sizes.
  std::vector<size_t> needed(buffers_.size(), 1);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    size_t& count = needed[b];
    for (size_t a = 0; a < dims.size(); ++a)
      if (program_.buffer_axes_[b] & (AxisMask{1} << a)) count *= static_cast<size_t>(dims[a]);
    if (count > buffer_sizes_[b]) {
      if (buffers_[b] != nullptr) CREMA_CUDA_CHECK(cudaFree(buffers_[b]));
      CREMA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffers_[b]), std::max<size_t>(count, 1) * sizeof(float)));
      buffer_sizes_[b] = count;
    }
  }
  for (size_t p = 0; p < program_.passes_.size(); ++p) {
    const FormulaProgram::Pass& pass = program_.passes_[p];
    const FormulaProgram::Layout layout = program_.PassLayout(pass, dims);
    KernelArgs args{};
    args.total = layout.total;
    args.reduced = layout.reduced;
    // A reduction's values: its buffer's (also where it reduces no elements: each is then the identity).
    args.values = pass.reduced == 0 ? 0 : static_cast<long long>(needed[pass.buffer]);
    args.rank = static_cast<int>(layout.sizes.size());
    args.accumulate = accumulate ? 1 : 0;
    std::copy(layout.sizes.begin(), layout.sizes.end(), args.sizes);
    for (size_t k = 0; k < pass.leaves.size(); ++k) {
      const FormulaProgram::Leaf& leaf = pass.leaves[k];
      args.leaves[k] = leaf.buffer >= 0 ? buffers_[leaf.buffer] : inputs.at(leaf.input);
      CREMA_CHECK(args.leaves[k] != nullptr) << "formula input " << leaf.input << " was not given";
      std::copy(layout.strides[k].begin(), layout.strides[k].end(), args.strides[k]);
      args.straight[k] = layout.straight[k] ? 1 : 0;
    }
    if (pass.reduced == 0) {
      for (size_t k = 0; k < pass.outputs.size(); ++k) args.outputs[k] = outputs.at(pass.outputs[k]);
    } else {
      args.outputs[0] = buffers_[pass.buffer];
      args.accumulate = 0;
    }
    int counts = 0;
    for (size_t i = 0; i < pass.code.size(); ++i)
      if (pass.code[i].op == FormulaOp::kCount) args.counts[counts++] = layout.values[i];
    constexpr int kThreads = 256;  // the reductions' tree assumes it
    int64_t blocks = pass.reduced == 0 ? (layout.total + kThreads - 1) / kThreads : args.values;
    blocks = std::min<int64_t>(std::max<int64_t>(blocks, 1), 65535);
    if ((pass.reduced == 0 && layout.total == 0) || (pass.reduced != 0 && args.values == 0)) continue;
    void* parameters[] = {&args};
    CREMA_CUDA_CHECK(cudaLaunchKernel(kernels_[p], dim3(static_cast<unsigned>(blocks)), dim3(kThreads), parameters, 0,
                                      static_cast<cudaStream_t>(stream)));
  }
}

#endif

}  // namespace crema
