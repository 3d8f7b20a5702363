#include "core/context.hpp"

#include "core/common.hpp"
#include "core/cuda_check.hpp"

namespace crema {

Context& Context::instance() {
  static Context context;
  return context;
}

bool Context::built_with_cuda() {
#ifdef CREMA_USE_CUDA
  return true;
#else
  return false;
#endif
}

int Context::gpu_count() {
#ifdef CREMA_USE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void Context::set_device(Device device, int gpu_id) {
  if (device == Device::kGPU) {
    CREMA_CHECK(built_with_cuda()) << "--gpu was given, but this crema was built with CPU_ONLY; rebuild "
                                      "with CUDA (see Makefile.config.example) or run on the CPU";
    const int count = gpu_count();
    CREMA_CHECK(count > 0) << "--gpu was given, but no CUDA device is visible on this machine";
    CREMA_CHECK(gpu_id >= 0 && gpu_id < count)
        << "GPU " << gpu_id << " does not exist: this machine has " << count << " CUDA device(s)";
#ifdef CREMA_USE_CUDA
    CREMA_CUDA_CHECK(cudaSetDevice(gpu_id));
#endif
  }
  instance().device_ = device;
  instance().gpu_id_ = gpu_id;
}

}  // namespace crema
