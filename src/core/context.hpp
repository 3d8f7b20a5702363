// The execution context of a net (a solver's nets share the solver's): the device they run on, the base seed
// of their random streams, which data-parallel replica they are, the engines the user forces, and, in CUDA
// builds, the CUDA stream and the cuBLAS / cuDNN handles, each created on first use.
//
// Nothing here is process-wide: every layer reaches its own context through Layer::context(), so two nets
// with two contexts train side by side in one process (one solver per GPU; concurrent branches later). A
// context is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#ifdef CREMA_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif
#ifdef CREMA_USE_CUDNN
#include <cudnn.h>
#endif

namespace crema {

class SyncedMemory;

enum class Device { kCPU, kGPU };
const char* DeviceName(Device device);

// Which part of each global batch a net reads under data parallelism: replica `rank` of `count`.
struct Replica {
  int rank = 0;
  int count = 1;
};

class Context {
 public:
  static constexpr uint64_t kDefaultSeed = 1701;

  // Selecting a GPU checks that crema was built with CUDA and that device `gpu_id` exists, and makes it the
  // calling thread's current device.
  explicit Context(Device device = Device::kCPU, int gpu_id = 0, uint64_t random_seed = kDefaultSeed);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  int gpu_id() const { return gpu_id_; }

  // The seed every random stream of the nets on this context derives from (see RandomStream::DeriveSeed).
  uint64_t random_seed() const { return random_seed_; }

  const Replica& replica() const { return replica_; }
  void set_replica(int rank, int count);

  // Engines forced by the user (crema's --engine flag): per layer type, and under "" for every type that
  // has an engine of that name. LayerRegistry::Create reads them.
  void force_engine(const std::string& layer_type, const std::string& engine) { forced_engines_[layer_type] = engine; }
  const std::map<std::string, std::string>& forced_engines() const { return forced_engines_; }
  // Parses "NAME" or "TYPE:NAME" items, comma separated (the --engine flag); throws naming a malformed item.
  void ForceEngines(const std::string& spec);

  // `count` ones on this context's device; bias terms broadcast and sum with it. Grows as asked.
  const float* ones(int count);

#ifdef CREMA_USE_CUDA
  // Makes this context's GPU the calling thread's current device (for worker threads).
  void MakeCurrent() const;
  cudaStream_t stream();
  cublasHandle_t cublas();
#endif
#ifdef CREMA_USE_CUDNN
  cudnnHandle_t cudnn();
#endif

  // Number of CUDA devices visible (0 in a CPU-only build or where none is present).
  static int gpu_count();
  static bool built_with_cuda();

 private:
  Device device_;
  int gpu_id_;
  uint64_t random_seed_;
  Replica replica_;
  std::map<std::string, std::string> forced_engines_;
  std::unique_ptr<SyncedMemory> ones_;
  int ones_count_ = 0;
#ifdef CREMA_USE_CUDA
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
#endif
#ifdef CREMA_USE_CUDNN
  cudnnHandle_t cudnn_ = nullptr;
#endif
};

}  // namespace crema
