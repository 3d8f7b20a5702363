#include "core/synced_memory.hpp"

#include <cstdlib>
#include <cstring>

#include "core/common.hpp"
#include "core/cuda_check.hpp"

namespace crema {

namespace {
constexpr size_t kHostAlignment = 64;  // a cache line, and enough for AVX-512 loads

void* allocate_host(size_t bytes) {
  size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* pointer = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  CREMA_CHECK(pointer != nullptr) << "out of host memory allocating " << bytes << " bytes";
  return pointer;
}
}  // namespace

SyncedMemory::~SyncedMemory() {
  std::free(host_);
#ifdef CREMA_USE_CUDA
  if (device_ != nullptr) cudaFree(device_);
#endif
}

void SyncedMemory::to_cpu() {
  switch (head_) {
    case Head::kUninitialized:
      host_ = allocate_host(bytes_);
      std::memset(host_, 0, bytes_);
      head_ = Head::kAtHost;
      break;
    case Head::kAtDevice:
#ifdef CREMA_USE_CUDA
      if (host_ == nullptr) host_ = allocate_host(bytes_);
      CREMA_CUDA_CHECK(cudaMemcpy(host_, device_, bytes_, cudaMemcpyDeviceToHost));
      head_ = Head::kSynced;
#endif
      break;
    case Head::kAtHost:
    case Head::kSynced:
      break;
  }
}

void SyncedMemory::to_gpu() {
#ifdef CREMA_USE_CUDA
  switch (head_) {
    case Head::kUninitialized:
      CREMA_CUDA_CHECK(cudaGetDevice(&device_id_));
      CREMA_CUDA_CHECK(cudaMalloc(&device_, bytes_ == 0 ? 1 : bytes_));
      CREMA_CUDA_CHECK(cudaMemset(device_, 0, bytes_));
      head_ = Head::kAtDevice;
      break;
    case Head::kAtHost:
      if (device_ == nullptr) {
        CREMA_CUDA_CHECK(cudaGetDevice(&device_id_));
        CREMA_CUDA_CHECK(cudaMalloc(&device_, bytes_ == 0 ? 1 : bytes_));
      }
      CREMA_CUDA_CHECK(cudaMemcpy(device_, host_, bytes_, cudaMemcpyHostToDevice));
      head_ = Head::kSynced;
      break;
    case Head::kAtDevice:
    case Head::kSynced:
      break;
  }
#else
  CREMA_FAIL() << "this crema was built without CUDA (CPU_ONLY): no GPU memory can be used";
#endif
}

const void* SyncedMemory::cpu_data() {
  to_cpu();
  return host_;
}

void* SyncedMemory::mutable_cpu_data() {
  to_cpu();
  head_ = Head::kAtHost;
  return host_;
}

const void* SyncedMemory::gpu_data() {
  to_gpu();
  return device_;
}

void* SyncedMemory::mutable_gpu_data() {
  to_gpu();
  head_ = Head::kAtDevice;
  return device_;
}

}  // namespace crema
