// A cache of freed blocks in front of an expensive allocator: the GPU's (cudaMalloc and cudaFree synchronize
// the device and cost tens of microseconds to milliseconds each). A net allocates the same sizes pass after
// pass (blobs reshaped to the same shapes, a test net built and dropped, solver buffers), so a freed block is
// kept under its size class and handed to the next request of that class, and the underlying allocator is
// called only when the cache has none. When the underlying allocator fails, every cached block is given back
// and the request tried once more, so the cache never makes a run fail that would have fitted without it.
//
// Size classes: requests round up to a multiple of 512 bytes below 1 MiB, and above it to the next of
// 1, 1.25, 1.5 and 1.75 times a power of two (at most a quarter wasted), so that sizes that differ a little
// (a last batch, a reshaped input) share blocks.
//
// Blocks are reused on the understanding that all work on them is ordered on one stream per device (what
// crema's contexts do): a block freed after kernels were queued on it is only written again by work queued
// later on the same stream. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace crema {

class CachingAllocator {
 public:
  // The underlying allocator: `allocate` returns nullptr when it cannot (out of memory), `release` gives a
  // block back.
  struct Backend {
    std::function<void*(size_t bytes)> allocate;
    std::function<void(void* block)> release;
  };
  // Bytes handed out (in use) and taken from the backend (in use + cached), now and at their peaks.
  struct Stats {
    size_t in_use = 0, peak_in_use = 0;
    size_t reserved = 0, peak_reserved = 0;
    size_t backend_allocations = 0;  // calls to the backend that returned memory
  };

  explicit CachingAllocator(Backend backend);
  ~CachingAllocator();  // gives every cached block back (blocks still in use belong to their holders)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (its size class), or nullptr when the backend cannot give one even with the
  // cache emptied. Zero bytes get the smallest class.
  void* Allocate(size_t bytes);
  // Takes back a block from Allocate; it stays cached until a request of its class or ReleaseCached().
  void Free(void* block);
  // Gives every cached block back to the backend.
  void ReleaseCached();

  Stats stats() const;
  void ResetPeaks();  // starts new peaks from what is held now

  static size_t SizeClass(size_t bytes);

 private:
  void ReleaseCachedLocked();

  Backend backend_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cached_;         // size class -> free blocks
  std::unordered_map<void*, size_t> in_use_;    // block -> its size class
  Stats stats_;
};

}  // namespace crema
