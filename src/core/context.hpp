// Process-wide execution settings: where layers run (CPU or a GPU) and the base seed of random streams.
#pragma once

#include <cstdint>
#include <string>

namespace crema {

enum class Device { kCPU, kGPU };

class Context {
 public:
  static Device device() { return instance().device_; }
  // Selecting the GPU checks that crema was built with CUDA and that device `gpu_id` exists.
  static void set_device(Device device, int gpu_id = 0);
  static int gpu_id() { return instance().gpu_id_; }

  // Number of CUDA devices visible (0 in a CPU-only build or where none is present).
  static int gpu_count();
  static bool built_with_cuda();

  // The seed from which every random stream of a net is derived (see RandomStream).
  static uint64_t random_seed() { return instance().random_seed_; }
  static void set_random_seed(uint64_t seed) { instance().random_seed_ = seed; }

 private:
  static Context& instance();
  Device device_ = Device::kCPU;
  int gpu_id_ = 0;
  uint64_t random_seed_ = 1701;
};

}  // namespace crema
