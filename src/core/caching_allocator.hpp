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
// Streams: a GPU runs the work of several streams at once (execution lanes, two nets on one device), so a block
// freed on the host may still be read by kernels queued before. Each block has the stream it was allocated for (its
// home) and the other streams it was used on (RecordUse). Freeing it records an event on each of them (Backend::
// record); a request on the home stream takes it back at once (its later work queues after what used it there) once
// the other streams' events are done, and a request on any other stream once all of them are. Without the event
// hooks (a backend with one stream, the tests' host backends) a freed block serves the next request of its class.
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crema {

class CachingAllocator {
 public:
  // A stream (a cudaStream_t; null for the device's default stream) and an event recorded on one.
  using Stream = void*;
  using Event = void*;
  // The underlying allocator: `allocate` returns nullptr when it cannot (out of memory), `release` gives a
  // block back.
  struct Backend {
    std::function<void*(size_t bytes)> allocate;
    std::function<void(void* block)> release;
    // Stream-ordered reuse, all four or none: `record` returns an event that completes when the work `stream` has
    // queued so far has run, `done` whether it has, `wait` blocks the host until it has, `forget` gives it back.
    std::function<Event(Stream stream)> record;
    std::function<bool(Event event)> done;
    std::function<void(Event event)> wait;
    std::function<void(Event event)> forget;
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

  // A block of at least `bytes` (its size class) for work on `stream`, or nullptr when the backend cannot give one
  // even with the cache emptied (after waiting for the events of freed blocks). Zero bytes get the smallest class.
  void* Allocate(size_t bytes, Stream stream = nullptr);
  // Work on `stream` uses `block` too: freeing it waits for that work as well.
  void RecordUse(void* block, Stream stream);
  // Takes back a block from Allocate; it stays cached until a request of its class may take it or ReleaseCached().
  void Free(void* block);
  // Gives every cached block back to the backend, first waiting for what may still use them.
  void ReleaseCached();
  // `stream` is about to be destroyed, its work all run (the caller synchronized it): every block that was for it
  // is now for the default stream (null), and it is no longer among any block's uses or pending events, so that
  // freeing such a block later (a buffer that outlives the stream) records on a stream that still exists.
  void ForgetStream(Stream stream);

  Stats stats() const;
  void ResetPeaks();  // starts new peaks from what is held now
  // Freed blocks whose streams' events are not all done yet.
  size_t pending() const;

  static size_t SizeClass(size_t bytes);

 private:
  struct Block {
    size_t size = 0;  // its size class
    Stream home = nullptr;
    std::vector<Stream> uses;                       // other streams it was used on (in use)
    std::vector<std::pair<Stream, Event>> pending;  // events recorded when it was freed, not yet seen done
    bool in_use = false;
  };
  bool streams() const { return static_cast<bool>(backend_.record); }
  // Whether a cached block may serve a request on `stream`: drops the events seen done.
  bool ReadyFor(Block* block, Stream stream);
  void ReleaseCachedLocked();

  Backend backend_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cached_;      // size class -> freed blocks
  std::unordered_map<void*, Block> blocks_;  // every block taken from the backend and not given back
  Stats stats_;
};

}  // namespace crema
