// A byte buffer with a host copy and (in CUDA builds) a device copy, each allocated on first use and
// copied only when the other side was written since: the "head" says which copies are current.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace crema {

// Bytes held by every SyncedMemory of the process, on the host and on GPUs: now and at the peak since the
// last ResetPeak. `crema time` reports the peak: what a run really needed, views and shared buffers counted
// once, never-touched gradients not at all (memory is allocated on first use).
struct MemoryStats {
  size_t host_bytes = 0, host_peak_bytes = 0;
  size_t device_bytes = 0, device_peak_bytes = 0;
  // What the GPUs' block caches (core/caching_allocator.hpp) hold from the devices: the blocks in use, rounded
  // to their size classes, and the freed ones kept for reuse.
  size_t device_reserved_bytes = 0, device_reserved_peak_bytes = 0;
  static MemoryStats Now();
  // Starts a new peak from what is held now.
  static void ResetPeak();
};

// A cap on the bytes all host blobs may hold at once; 0 (the default) means none. An allocation beyond it fails
// with the same "out of host memory" error as one the system refuses, naming the cap. Without a cap a blob
// larger than the free memory may still be granted by the kernel (overcommit) and the process killed when its
// pages are touched; with one the run stops with a message instead. The environment variable
// CREMA_HOST_MEMORY_LIMIT sets it for a whole run (bytes, or a number with K, M, G or T: powers of 1024);
// a value that is not a size is an error at the first allocation.
void SetHostMemoryLimit(size_t bytes);
size_t HostMemoryLimit();

// The stream (a cudaStream_t) the device blocks the calling thread allocates are for (core/caching_allocator.hpp):
// null, the device's default stream, except while a GPU context's lane runs work (Context::LaneScope sets the lane's).
void SetAllocationStream(void* stream);
void* AllocationStream();
// A stream of GPU `device` about to be destroyed, its work all run: the device's block cache forgets it
// (CachingAllocator::ForgetStream), so a block allocated for it and freed later is freed on the default stream.
// Nothing to do in a CPU-only build.
void ForgetDeviceStream(int device, void* stream);

class SyncedMemory {
 public:
  enum class Head { kUninitialized, kAtHost, kAtDevice, kSynced };

  explicit SyncedMemory(size_t bytes = 0);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  // Reading never marks the other copy stale; asking for a mutable pointer does.
  const void* cpu_data();
  void* mutable_cpu_data();
  const void* gpu_data();
  void* mutable_gpu_data();

  size_t size() const { return bytes_; }
  // Starts copying the host copy (which must be current) to the device on `stream` (a cudaStream_t) and marks
  // both current: the caller synchronizes `stream` before anyone reads the device copy. The data prefetch
  // thread uploads batches so, on a stream of its own, while the compute stream runs. CUDA builds only.
  void async_gpu_push(void* stream);
  // Work queued on `stream` (a cudaStream_t) uses the device copy, besides the stream it was allocated for: its block
  // is reused after this memory is freed only once that work has run. Nothing to do without a device copy.
  void record_stream(void* stream);
  Head head() const { return head_; }
  // A stamp that changes whenever the contents may have changed: taken from one process-wide counter at
  // construction and at every request for a mutable pointer, so that (memory, stamp) never repeats. Caches
  // derived from the contents (an engine's weights reordered into its own layout) stay valid while it holds.
  // Writers ask for a mutable pointer for each round of writes, as the host/device sync already requires.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }

 private:
  void to_cpu();
  void to_gpu();

  size_t bytes_;
  void* host_ = nullptr;
  void* device_ = nullptr;
  [[maybe_unused]] int device_id_ = -1;  // the GPU of device_ (CUDA builds)
  Head head_ = Head::kUninitialized;
  std::atomic<uint64_t> version_;
};

}  // namespace crema
