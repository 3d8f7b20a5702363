#include "core/synced_memory.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/common.hpp"
#include "core/cuda_check.hpp"

namespace crema {

namespace {
constexpr size_t kHostAlignment = 64;  // a cache line, and enough for AVX-512 loads

// Held and peak bytes; atomics, since nets on several threads allocate at once.
struct Counter {
  std::atomic<size_t> held{0}, peak{0};
  void add(size_t bytes) {
    const size_t now = held.fetch_add(bytes) + bytes;
    size_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
  void remove(size_t bytes) { held.fetch_sub(bytes); }
};
Counter host_counter, device_counter;

std::atomic<uint64_t> next_version{1};

void* allocate_host(size_t bytes) {
  size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* pointer = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  CREMA_CHECK(pointer != nullptr) << "out of host memory allocating " << bytes << " bytes";
  host_counter.add(bytes);
  return pointer;
}

#ifdef CREMA_USE_CUDA
void* allocate_device(size_t bytes, int* device_id) {
  void* pointer = nullptr;
  CREMA_CUDA_CHECK(cudaGetDevice(device_id));
  const cudaError_t status = cudaMalloc(&pointer, bytes == 0 ? 1 : bytes);
  CREMA_CHECK(status == cudaSuccess) << "out of memory on GPU " << *device_id << " allocating " << bytes
                                     << " bytes: " << cudaGetErrorString(status);
  device_counter.add(bytes);
  return pointer;
}
#endif
}  // namespace

MemoryStats MemoryStats::Now() {
  MemoryStats stats;
  stats.host_bytes = host_counter.held;
  stats.host_peak_bytes = host_counter.peak;
  stats.device_bytes = device_counter.held;
  stats.device_peak_bytes = device_counter.peak;
  return stats;
}

void MemoryStats::ResetPeak() {
  host_counter.peak = host_counter.held.load();
  device_counter.peak = device_counter.held.load();
}

SyncedMemory::SyncedMemory(size_t bytes) : bytes_(bytes), version_(next_version++) {}

SyncedMemory::~SyncedMemory() {
  if (host_ != nullptr) {
    std::free(host_);
    host_counter.remove(bytes_);
  }
#ifdef CREMA_USE_CUDA
  if (device_ != nullptr) {
    cudaFree(device_);
    device_counter.remove(bytes_);
  }
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
      device_ = allocate_device(bytes_, &device_id_);
      CREMA_CUDA_CHECK(cudaMemset(device_, 0, bytes_));
      head_ = Head::kAtDevice;
      break;
    case Head::kAtHost:
      if (device_ == nullptr) device_ = allocate_device(bytes_, &device_id_);
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
  version_ = next_version++;
  return host_;
}

const void* SyncedMemory::gpu_data() {
  to_gpu();
  return device_;
}

void* SyncedMemory::mutable_gpu_data() {
  to_gpu();
  head_ = Head::kAtDevice;
  version_ = next_version++;
  return device_;
}

}  // namespace crema
