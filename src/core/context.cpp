#include "core/context.hpp"

#include <sstream>
#include <vector>

#include "core/common.hpp"
#include "core/cuda_check.hpp"
#include "core/synced_memory.hpp"
#include "core/threads.hpp"

namespace crema {

const char* DeviceName(Device device) { return device == Device::kGPU ? "GPU" : "CPU"; }

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

Context::Context(Device device, int gpu_id, uint64_t random_seed)
    : device_(device), gpu_id_(gpu_id), random_seed_(random_seed) {
  ApplyThreadPolicy();
  if (device != Device::kGPU) return;
  CREMA_CHECK(built_with_cuda()) << "a GPU was asked for (--gpu or solver_mode: GPU), but this crema was built "
                                    "with CPU_ONLY; rebuild with CUDA (see Makefile.config.example) or run on the CPU";
  const int count = gpu_count();
  CREMA_CHECK(count > 0) << "a GPU was asked for (--gpu or solver_mode: GPU), but no CUDA device is visible on "
                            "this machine";
  CREMA_CHECK(gpu_id >= 0 && gpu_id < count)
      << "GPU " << gpu_id << " does not exist: this machine has " << count << " CUDA device(s) (--gpu or device_id)";
#ifdef CREMA_USE_CUDA
  MakeCurrent();
#endif
}

Context::~Context() {
#ifdef CREMA_USE_CUDNN
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
#endif
#ifdef CREMA_USE_CUDA
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
}

void Context::set_replica(int rank, int count) {
  CREMA_CHECK(count >= 1 && rank >= 0 && rank < count)
      << "replica " << rank << " of " << count << " does not exist (ranks run from 0 to count - 1)";
  replica_ = Replica{rank, count};
}

void Context::ForceEngines(const std::string& spec) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string type = colon == std::string::npos ? "" : item.substr(0, colon);
    const std::string engine = colon == std::string::npos ? item : item.substr(colon + 1);
    CREMA_CHECK(!engine.empty() && (colon == std::string::npos || !type.empty()) &&
                engine.find(':') == std::string::npos)
        << "--engine='" << spec << "': '" << item << "' is neither an engine name (e.g. reference) nor "
        << "TYPE:ENGINE (e.g. Convolution:reference)";
    force_engine(type, engine);
  }
}

const float* Context::ones(int count) {
  if (count > ones_count_) {
    ones_ = std::make_unique<SyncedMemory>(static_cast<size_t>(count) * sizeof(float));
    float* host = static_cast<float*>(ones_->mutable_cpu_data());
    for (int i = 0; i < count; ++i) host[i] = 1.f;
    ones_count_ = count;
  }
  if (count == 0) return nullptr;
  return static_cast<const float*>(device_ == Device::kGPU ? ones_->gpu_data() : ones_->cpu_data());
}

#ifdef CREMA_USE_CUDA
void Context::MakeCurrent() const {
  if (device_ == Device::kGPU) CREMA_CUDA_CHECK(cudaSetDevice(gpu_id_));
}

cudaStream_t Context::stream() {
  if (stream_ == nullptr) {
    MakeCurrent();
    // A blocking stream: SyncedMemory's copies on the legacy default stream wait for the kernels queued here.
    CREMA_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  return stream_;
}

cublasHandle_t Context::cublas() {
  if (cublas_ == nullptr) {
    MakeCurrent();
    CREMA_CUBLAS_CHECK(cublasCreate(&cublas_));
    CREMA_CUBLAS_CHECK(cublasSetStream(cublas_, stream()));
  }
  return cublas_;
}
#endif

#ifdef CREMA_USE_CUDNN
cudnnHandle_t Context::cudnn() {
  if (cudnn_ == nullptr) {
    MakeCurrent();
    CREMA_CUDNN_CHECK(cudnnCreate(&cudnn_));
    CREMA_CUDNN_CHECK(cudnnSetStream(cudnn_, stream()));
  }
  return cudnn_;
}
#endif

}  // namespace crema
