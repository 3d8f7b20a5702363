#include "tools/lib/device_query.hpp"

#include <sstream>

#include "core/common.hpp"
#include "core/context.hpp"

#ifdef CREMA_USE_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif
#ifdef CREMA_USE_CUDNN
#include "core/cudnn.hpp"
#endif

namespace crema {

namespace {
template <typename T>
std::string Text(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

#ifdef CREMA_USE_CUDA
std::string Version(int encoded) {  // CUDA's 1000 * major + 10 * minor
  return Text(encoded / 1000) + "." + Text(encoded % 1000 / 10);
}
#endif
}  // namespace

DeviceFacts QueryGpu(int gpu_id) {
  CREMA_CHECK(Context::built_with_cuda()) << "this crema was built without CUDA (CPU_ONLY): there is no GPU to query";
  const int count = Context::gpu_count();
  CREMA_CHECK(count > 0) << "no CUDA device is visible on this machine (is the NVIDIA driver loaded?)";
  CREMA_CHECK(gpu_id >= 0 && gpu_id < count)
      << "GPU " << gpu_id << " does not exist: this machine has " << count << " (ids 0 to " << count - 1 << ")";
  DeviceFacts facts;
#ifdef CREMA_USE_CUDA
  cudaDeviceProp p{};
  CREMA_CUDA_CHECK(cudaGetDeviceProperties(&p, gpu_id));
  const double mib = 1024.0 * 1024.0;
  facts = {
      {"Device id", Text(gpu_id)},
      {"Major revision number", Text(p.major)},
      {"Minor revision number", Text(p.minor)},
      {"Name", p.name},
      {"Total global memory",
       Text(p.totalGlobalMem) + " (" + Text(static_cast<long long>(p.totalGlobalMem / mib)) + " MiB)"},
      {"Total shared memory per block", Text(p.sharedMemPerBlock)},
      {"Total registers per block", Text(p.regsPerBlock)},
      {"Warp size", Text(p.warpSize)},
      {"Maximum memory pitch", Text(p.memPitch)},
      {"Maximum threads per block", Text(p.maxThreadsPerBlock)},
      {"Maximum dimension of block",
       Text(p.maxThreadsDim[0]) + ", " + Text(p.maxThreadsDim[1]) + ", " + Text(p.maxThreadsDim[2])},
      {"Maximum dimension of grid",
       Text(p.maxGridSize[0]) + ", " + Text(p.maxGridSize[1]) + ", " + Text(p.maxGridSize[2])},
      {"Total constant memory", Text(p.totalConstMem)},
      {"Texture alignment", Text(p.textureAlignment)},
      {"Concurrent copy and execution", p.asyncEngineCount > 0 ? "Yes" : "No"},
      {"Number of multiprocessors", Text(p.multiProcessorCount)},
      {"L2 cache", Text(p.l2CacheSize / 1024) + " KiB"},
      {"Memory bus width", Text(p.memoryBusWidth) + " bits"},
      {"ECC enabled", p.ECCEnabled ? "Yes" : "No"},
      {"PCI bus id", Text(p.pciDomainID) + ":" + Text(p.pciBusID) + ":" + Text(p.pciDeviceID)},
  };
  int current = 0;
  CREMA_CUDA_CHECK(cudaGetDevice(&current));
  CREMA_CUDA_CHECK(cudaSetDevice(gpu_id));
  size_t free_bytes = 0, total_bytes = 0;
  CREMA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  CREMA_CUDA_CHECK(cudaSetDevice(current));
  facts.push_back({"Free global memory", Text(static_cast<long long>(free_bytes / mib)) + " MiB"});
  int driver = 0, runtime = 0;
  CREMA_CUDA_CHECK(cudaDriverGetVersion(&driver));
  CREMA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  facts.push_back({"CUDA driver version", Version(driver)});
  facts.push_back({"CUDA runtime version", Version(runtime)});
#endif
#ifdef CREMA_USE_CUDNN
  const size_t cudnn_version = cudnn::Version();
  facts.push_back({"cuDNN version", Text(cudnn_version / 10000) + "." + Text(cudnn_version / 100 % 100) + "." +
                                        Text(cudnn_version % 100)});
#endif
  return facts;
}

}  // namespace crema
