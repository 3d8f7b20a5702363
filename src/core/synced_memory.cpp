#include "core/synced_memory.hpp"

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "core/caching_allocator.hpp"
#include "core/common.hpp"
#include "core/cuda_check.hpp"

namespace crema {

namespace {
constexpr size_t kHostAlignment = 64;  // a cache line, and enough for AVX-512 loads

// Held and peak bytes; atomics, since nets on several threads allocate at once.
struct Counter {
  std::atomic<size_t> held{0}, peak{0};
  void add(size_t bytes) { note_peak(held.fetch_add(bytes) + bytes); }
  void note_peak(size_t now) {
    size_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
  void remove(size_t bytes) { held.fetch_sub(bytes); }
};
Counter host_counter, device_counter;

std::atomic<uint64_t> next_version{1};

// "6.4 GiB (6912000000 bytes)": the exact count for the record, the rounded one for a person.
std::string DescribeBytes(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " bytes";
  char rounded[32];
  std::snprintf(rounded, sizeof(rounded), "%.1f %s", value, units[unit]);
  return std::string(rounded) + " (" + std::to_string(bytes) + " bytes)";
}

// "512M" -> 536870912; false when `text` is not a whole number with at most one unit letter.
bool ParseByteCount(const std::string& text, size_t* bytes) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15 || text.size() > digits + 1) return false;
  size_t value = std::stoull(text.substr(0, digits));
  if (text.size() == digits + 1) {
    const std::string units = "KMGT";
    const size_t unit = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(text.back()))));
    if (unit == std::string::npos) return false;
    for (size_t i = 0; i <= unit; ++i) {
      if (value > (SIZE_MAX >> 10)) return false;
      value <<= 10;
    }
  }
  *bytes = value;
  return true;
}

// The cap, read from the environment on first use (then SetHostMemoryLimit may change it).
std::atomic<size_t>& HostLimit() {
  static std::atomic<size_t> limit{[] {
    size_t bytes = 0;
    const char* text = std::getenv("CREMA_HOST_MEMORY_LIMIT");
    if (text != nullptr && *text != '\0') {
      CREMA_CHECK(ParseByteCount(text, &bytes))
          << "CREMA_HOST_MEMORY_LIMIT='" << text << "' is not a size: give bytes, or a number with K, M, G or T "
          << "(such as 512M or 8G)";
    }
    return bytes;
  }()};
  return limit;
}

void* allocate_host(size_t bytes) {
  // Reserve under the cap first, so that threads allocating at once cannot overshoot it together.
  const size_t limit = HostLimit();
  const size_t before = host_counter.held.fetch_add(bytes);
  if (limit != 0 && before + bytes > limit) {
    host_counter.held.fetch_sub(bytes);
    CREMA_FAIL() << "out of host memory: cannot allocate " << DescribeBytes(bytes) << " for a blob ("
                 << DescribeBytes(before) << " held, limit " << DescribeBytes(limit) << " set by CREMA_HOST_MEMORY_LIMIT)";
  }
  size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* pointer = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  if (pointer == nullptr) host_counter.held.fetch_sub(bytes);
  // The net adds the layer whose blob this is (Net::Build, ForwardStep).
  CREMA_CHECK(pointer != nullptr) << "out of host memory: cannot allocate " << DescribeBytes(bytes)
                                  << " for a blob";
  host_counter.note_peak(before + bytes);
  return pointer;
}

thread_local void* allocation_stream = nullptr;

#ifdef CREMA_USE_CUDA
// One cache of device blocks per GPU (core/caching_allocator.hpp), never destroyed: blocks may be freed by
// static destructors after the CUDA runtime has begun to shut down, when giving them back is moot.
std::mutex device_caches_mutex;
std::map<int, CachingAllocator*>& DeviceCaches() {
  static auto* caches = new std::map<int, CachingAllocator*>();
  return *caches;
}

CachingAllocator& DeviceCache(int device) {
  std::lock_guard<std::mutex> lock(device_caches_mutex);
  CachingAllocator*& cache = DeviceCaches()[device];
  if (cache == nullptr) {
    CachingAllocator::Backend backend;
    // Called from allocate_device, which found `device` current on this thread.
    backend.allocate = [](size_t bytes) -> void* {
      void* pointer = nullptr;
      if (cudaMalloc(&pointer, bytes) != cudaSuccess) {
        cudaGetLastError();  // clears the error, so the retry after emptying the cache starts clean
        return nullptr;
      }
      return pointer;
    };
    backend.release = [](void* pointer) { cudaFree(pointer); };
    // Events for stream-ordered reuse, from a pool of this device's (the hooks run under the cache's lock, one at a
    // time), made and recorded with the device current, whichever thread frees the block.
    auto pool = std::make_shared<std::vector<cudaEvent_t>>();
    backend.record = [device, pool](void* stream) -> void* {
      int current = device;
      CREMA_CUDA_CHECK(cudaGetDevice(&current));
      if (current != device) CREMA_CUDA_CHECK(cudaSetDevice(device));
      cudaEvent_t event = nullptr;
      if (pool->empty()) {
        CREMA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      } else {
        event = pool->back();
        pool->pop_back();
      }
      CREMA_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
      if (current != device) CREMA_CUDA_CHECK(cudaSetDevice(current));
      return event;
    };
    backend.done = [](void* event) {
      const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
      if (status == cudaErrorNotReady) return false;
      CREMA_CUDA_CHECK(status);
      return true;
    };
    backend.wait = [](void* event) { CREMA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); };
    backend.forget = [pool](void* event) { pool->push_back(static_cast<cudaEvent_t>(event)); };
    cache = new CachingAllocator(std::move(backend));
  }
  return *cache;
}

void* allocate_device(size_t bytes, int* device_id) {
  CREMA_CUDA_CHECK(cudaGetDevice(device_id));
  void* pointer = DeviceCache(*device_id).Allocate(bytes, AllocationStream());
  if (pointer == nullptr) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    CREMA_FAIL() << "out of memory on GPU " << *device_id << ": cannot allocate " << DescribeBytes(bytes)
                 << " for a blob (" << DescribeBytes(free_bytes) << " of " << DescribeBytes(total_bytes)
                 << " free on the device)";
  }
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
#ifdef CREMA_USE_CUDA
  std::lock_guard<std::mutex> lock(device_caches_mutex);
  for (const auto& [device, cache] : DeviceCaches()) {
    const CachingAllocator::Stats cached = cache->stats();
    stats.device_reserved_bytes += cached.reserved;
    stats.device_reserved_peak_bytes += cached.peak_reserved;
  }
#endif
  return stats;
}

void MemoryStats::ResetPeak() {
  host_counter.peak = host_counter.held.load();
  device_counter.peak = device_counter.held.load();
#ifdef CREMA_USE_CUDA
  std::lock_guard<std::mutex> lock(device_caches_mutex);
  for (const auto& [device, cache] : DeviceCaches()) cache->ResetPeaks();
#endif
}

void SetAllocationStream(void* stream) { allocation_stream = stream; }
void* AllocationStream() { return allocation_stream; }

void SetHostMemoryLimit(size_t bytes) { HostLimit() = bytes; }
size_t HostMemoryLimit() { return HostLimit(); }

SyncedMemory::SyncedMemory(size_t bytes) : bytes_(bytes), version_(next_version++) {}

SyncedMemory::~SyncedMemory() {
  if (host_ != nullptr) {
    std::free(host_);
    host_counter.remove(bytes_);
  }
#ifdef CREMA_USE_CUDA
  if (device_ != nullptr) {
    DeviceCache(device_id_).Free(device_);
    device_counter.remove(bytes_);
  }
#endif
}

void ForgetDeviceStream(int device, void* stream) {
#ifdef CREMA_USE_CUDA
  DeviceCache(device).ForgetStream(stream);
#else
  (void)device;
  (void)stream;
#endif
}

void SyncedMemory::record_stream(void* stream) {
#ifdef CREMA_USE_CUDA
  if (device_ != nullptr) DeviceCache(device_id_).RecordUse(device_, stream);
#else
  (void)stream;
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

void SyncedMemory::async_gpu_push(void* stream) {
#ifdef CREMA_USE_CUDA
  CREMA_CHECK(head_ == Head::kAtHost) << "async_gpu_push needs data written on the host";
  if (device_ == nullptr) device_ = allocate_device(bytes_, &device_id_);
  CREMA_CUDA_CHECK(cudaMemcpyAsync(device_, host_, bytes_, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)));
  head_ = Head::kSynced;
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
  // Lanes write parts of one arena at once: the head is written only where it changes, the version atomically.
  if (head_ != Head::kAtHost) head_ = Head::kAtHost;
  version_.store(next_version++, std::memory_order_relaxed);
  return host_;
}

const void* SyncedMemory::gpu_data() {
  to_gpu();
  return device_;
}

void* SyncedMemory::mutable_gpu_data() {
  to_gpu();
  head_ = Head::kAtDevice;
  version_.store(next_version++, std::memory_order_relaxed);
  return device_;
}

}  // namespace crema
