#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/caching_allocator.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// A host backend that counts its calls, holds at most `capacity` bytes, and checks every release is a block it
// gave and still holds.
struct CountingBackend {
  size_t capacity = size_t{1} << 30;
  size_t held = 0;
  int allocations = 0, releases = 0;
  std::map<void*, size_t> live;  // block -> bytes
  std::vector<size_t> sizes;  // of each allocation, in order

  CachingAllocator::Backend Make() {
    CachingAllocator::Backend backend;
    backend.allocate = [this](size_t bytes) -> void* {
      if (held + bytes > capacity) return nullptr;
      void* block = std::malloc(bytes);
      live[block] = bytes;
      held += bytes;
      ++allocations;
      sizes.push_back(bytes);
      return block;
    };
    backend.release = [this](void* block) {
      auto found = live.find(block);
      ASSERT_NE(found, live.end()) << "released a block it did not give, or twice";
      held -= found->second;
      live.erase(found);
      std::free(block);
      ++releases;
    };
    return backend;
  }
};

TEST(CachingAllocatorTest, SizeClassesRoundUpByAtMostAQuarter) {
  EXPECT_EQ(CachingAllocator::SizeClass(0), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(513), 1024u);
  const size_t mib = size_t{1} << 20;
  EXPECT_EQ(CachingAllocator::SizeClass(mib), mib);
  EXPECT_EQ(CachingAllocator::SizeClass(mib + 1), mib + mib / 4);
  EXPECT_EQ(CachingAllocator::SizeClass(3 * mib), 3 * mib);  // 1.5 x 2 MiB, a class of its own
  EXPECT_EQ(CachingAllocator::SizeClass(7 * mib + 1), 8 * mib);         // above 1.75 x 4 MiB
  for (size_t bytes = 1; bytes < (size_t{1} << 34); bytes = bytes * 3 + 7) {
    const size_t size = CachingAllocator::SizeClass(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, std::max(bytes + 511, bytes + bytes / 4)) << bytes;
    EXPECT_EQ(CachingAllocator::SizeClass(size), size) << "a class is its own class: " << bytes;
  }
}

TEST(CachingAllocatorTest, AFreedBlockServesTheNextRequestOfItsClass) {
  CountingBackend backend;
  CachingAllocator cache(backend.Make());
  void* a = cache.Allocate(1000);
  void* b = cache.Allocate(5000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(backend.allocations, 2);
  cache.Free(a);
  // 900 bytes round to the same 1024-byte class as 1000: the cached block, no backend call.
  EXPECT_EQ(cache.Allocate(900), a);
  EXPECT_EQ(backend.allocations, 2);
  // Another class gets a new block.
  void* c = cache.Allocate(3000);
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  EXPECT_EQ(backend.allocations, 3);
  EXPECT_EQ(backend.sizes, (std::vector<size_t>{1024, 5120, 3072}));
  // A pass over the same sizes again, as a net's next iteration: nothing new from the backend.
  for (int pass = 0; pass < 5; ++pass) {
    cache.Free(a);
    cache.Free(b);
    cache.Free(c);
    a = cache.Allocate(1000);
    b = cache.Allocate(5000);
    c = cache.Allocate(3000);
  }
  EXPECT_EQ(backend.allocations, 3);
  EXPECT_EQ(backend.releases, 0);
  const CachingAllocator::Stats stats = cache.stats();
  EXPECT_EQ(stats.in_use, 1024u + 5120u + 3072u);
  EXPECT_EQ(stats.reserved, stats.in_use);
  EXPECT_EQ(stats.backend_allocations, 3u);
  // Blocks freed to the cache go back to the backend when the cache goes (LeakSanitizer checks the rest).
  cache.Free(a);
  cache.Free(b);
  cache.Free(c);
}

TEST(CachingAllocatorTest, StatsCountInUseAndReservedWithTheirPeaks) {
  CountingBackend backend;
  CachingAllocator cache(backend.Make());
  void* a = cache.Allocate(2048);
  void* b = cache.Allocate(4096);
  cache.Free(a);
  CachingAllocator::Stats stats = cache.stats();
  EXPECT_EQ(stats.in_use, 4096u);
  EXPECT_EQ(stats.peak_in_use, 6144u);
  EXPECT_EQ(stats.reserved, 6144u);  // the freed block is still held
  EXPECT_EQ(stats.peak_reserved, 6144u);
  cache.ResetPeaks();
  EXPECT_EQ(cache.stats().peak_in_use, 4096u);
  cache.ReleaseCached();
  stats = cache.stats();
  EXPECT_EQ(stats.reserved, 4096u);
  EXPECT_EQ(backend.releases, 1);
  EXPECT_EQ(backend.live.count(a), 0u);
  cache.Free(b);
}

TEST(CachingAllocatorTest, WhenTheBackendIsFullTheCacheIsGivenBackAndTheRequestRetried) {
  CountingBackend backend;
  backend.capacity = 10 * 1024;
  CachingAllocator cache(backend.Make());
  void* a = cache.Allocate(4096);
  void* b = cache.Allocate(4096);
  cache.Free(a);
  cache.Free(b);
  // 6 KiB fits only once the two cached 4 KiB blocks are given back.
  void* c = cache.Allocate(6 * 1024);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(backend.releases, 2);
  EXPECT_EQ(cache.stats().reserved, 6u * 1024);
  // More than the backend has at all: nullptr, and the block in use is untouched.
  EXPECT_EQ(cache.Allocate(8 * 1024), nullptr);
  EXPECT_EQ(backend.live.count(c), 1u);
  cache.Free(c);
}

TEST(CachingAllocatorTest, FreeingABlockItDidNotGiveIsAnError) {
  CountingBackend backend;
  CachingAllocator cache(backend.Make());
  int not_a_block = 0;
  test::ExpectErrorContaining([&] { cache.Free(&not_a_block); }, {"did not hand out"});
  void* a = cache.Allocate(10);
  cache.Free(a);
  test::ExpectErrorContaining([&] { cache.Free(a); }, {"freed twice"});
  cache.Free(nullptr);  // as free(nullptr): nothing
}

TEST(CachingAllocatorTest, TheDestructorGivesBackEveryCachedBlock) {
  CountingBackend backend;
  {
    CachingAllocator cache(backend.Make());
    for (int i = 0; i < 4; ++i) cache.Free(cache.Allocate(1000 * (i + 1)));
  }
  EXPECT_EQ(backend.allocations, 4);
  EXPECT_EQ(backend.releases, 4);
  EXPECT_TRUE(backend.live.empty());
}

TEST(CachingAllocatorTest, ThreadsAllocatingAtOnceGetDistinctBlocks) {
  CountingBackend backend;
  // The counting backend is not thread-safe itself: the cache calls it under its own lock.
  CachingAllocator cache(backend.Make());
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::vector<void*>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        void* block = cache.Allocate(512 * (1 + r % 3));
        held[t].push_back(block);
        if (r % 2 == 1) {
          cache.Free(held[t].front());
          held[t].erase(held[t].begin());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<void*> distinct;
  size_t count = 0;
  for (const auto& blocks : held) {
    distinct.insert(blocks.begin(), blocks.end());
    count += blocks.size();
  }
  EXPECT_EQ(distinct.size(), count) << "a block handed to two holders at once";
  for (const auto& blocks : held)
    for (void* block : blocks) cache.Free(block);
  EXPECT_EQ(cache.stats().in_use, 0u);
}

// The host rehearsal of a device's streams for the cache: an event is a number that completes when the test says
// its stream's work has run (Run), or when the host waits for it.
struct StreamsBackend : CountingBackend {
  int next_event = 1;
  std::map<int, CachingAllocator::Stream> stream_of;  // live events
  std::set<int> completed;
  int waits = 0;

  CachingAllocator::Backend MakeWithEvents() {
    CachingAllocator::Backend backend = Make();
    backend.record = [this](CachingAllocator::Stream stream) {
      stream_of[next_event] = stream;
      return reinterpret_cast<CachingAllocator::Event>(static_cast<intptr_t>(next_event++));
    };
    backend.done = [this](CachingAllocator::Event event) { return completed.count(Number(event)) > 0; };
    backend.wait = [this](CachingAllocator::Event event) {
      completed.insert(Number(event));
      ++waits;
    };
    backend.forget = [this](CachingAllocator::Event event) {
      EXPECT_EQ(stream_of.erase(Number(event)), 1u) << "an event forgotten twice or never recorded";
    };
    return backend;
  }
  static int Number(CachingAllocator::Event event) { return static_cast<int>(reinterpret_cast<intptr_t>(event)); }
  // The work queued on `stream` so far has run: its events complete.
  void Run(CachingAllocator::Stream stream) {
    for (const auto& [event, on] : stream_of)
      if (on == stream) completed.insert(event);
  }
};

CachingAllocator::Stream StreamNumber(intptr_t n) { return reinterpret_cast<CachingAllocator::Stream>(n); }

TEST(CachingAllocatorTest, AFreedBlockServesItsOwnStreamAtOnceAndAnotherOnlyOnceItsWorkHasRun) {
  StreamsBackend backend;
  const CachingAllocator::Stream a = StreamNumber(1), b = StreamNumber(2);
  {
    CachingAllocator cache(backend.MakeWithEvents());
    void* block = cache.Allocate(1000, a);
    cache.Free(block);
    EXPECT_EQ(backend.stream_of.size(), 1u);  // an event on a, its home
    // Stream a's next work queues after what used the block there: it takes it back at once.
    EXPECT_EQ(cache.Allocate(1000, a), block);
    EXPECT_TRUE(backend.stream_of.empty());  // that event is no longer needed
    cache.Free(block);
    // Stream b's work would run beside a's: a new block, until a's work has run.
    void* other = cache.Allocate(1000, b);
    EXPECT_NE(other, block);
    EXPECT_EQ(cache.pending(), 1u);
    cache.Free(other);
    backend.Run(a);
    void* again = cache.Allocate(1000, b);
    EXPECT_TRUE(again == block || again == other);
    void* last = cache.Allocate(1000, b);
    EXPECT_TRUE((last == block || last == other) && last != again);
    EXPECT_EQ(backend.allocations, 2);
    cache.Free(again);
    cache.Free(last);
  }
  // The cache waited for what was pending before giving the blocks back.
  EXPECT_TRUE(backend.live.empty());
  EXPECT_TRUE(backend.stream_of.empty());
}

TEST(CachingAllocatorTest, ABlockUsedOnAnotherStreamWaitsForThatStreamToo) {
  StreamsBackend backend;
  const CachingAllocator::Stream a = StreamNumber(1), b = StreamNumber(2);
  CachingAllocator cache(backend.MakeWithEvents());
  void* block = cache.Allocate(4096, a);
  cache.RecordUse(block, b);
  cache.RecordUse(block, b);  // once is enough
  cache.RecordUse(block, a);  // its home: nothing more
  cache.Free(block);
  EXPECT_EQ(backend.stream_of.size(), 2u);  // events on a and on b
  // Even its home stream waits for b's reads.
  void* fresh = cache.Allocate(4096, a);
  EXPECT_NE(fresh, block);
  cache.Free(fresh);
  backend.Run(b);
  void* reused = cache.Allocate(4096, a);  // its own stream first: one of the two, whichever b's event no longer holds
  EXPECT_TRUE(reused == block || reused == fresh);
  cache.Free(reused);
  backend.Run(a);
  void* on_b = cache.Allocate(4096, b);
  EXPECT_NE(on_b, nullptr);
  EXPECT_EQ(backend.allocations, 2);
  cache.Free(on_b);
  test::ExpectErrorContaining([&] { cache.RecordUse(StreamNumber(7), a); }, {"a block not in use"});
}

// A stream destroyed while blocks were for it (a context's lane streams, with buffers that outlive them): freeing
// such a block afterwards records its event on the default stream, never on the forgotten one (on a GPU recording
// on a destroyed stream crashed, docs/gpu-record.md run 3).
TEST(CachingAllocatorTest, AForgottenStreamIsNeverRecordedOnAgain) {
  StreamsBackend backend;
  const CachingAllocator::Stream lane = StreamNumber(3), other = StreamNumber(4);
  CachingAllocator cache(backend.MakeWithEvents());
  void* held = cache.Allocate(2048, lane);   // still held when the lane's stream goes
  void* used = cache.Allocate(2048, other);  // used on the lane too
  cache.RecordUse(used, lane);
  void* freed = cache.Allocate(8192, lane);  // freed before: an event pending on the lane
  cache.Free(freed);
  backend.Run(lane);
  cache.ForgetStream(lane);
  cache.ForgetStream(nullptr);  // the default stream is never forgotten: nothing happens
  const int first_new = backend.next_event;
  cache.Free(held);
  cache.Free(used);
  EXPECT_EQ(backend.next_event, first_new + 2);  // held's event on the default stream, used's on its home
  for (const auto& [event, stream] : backend.stream_of) {
    if (event >= first_new) {
      EXPECT_NE(stream, lane) << "event " << event;
    }
  }
  // The default stream's request takes the block that was the lane's once its events are done.
  backend.Run(nullptr);
  backend.Run(other);
  void* again = cache.Allocate(8192, nullptr);
  EXPECT_EQ(again, freed);
  EXPECT_EQ(backend.allocations, 3);
  cache.Free(again);
}

TEST(CachingAllocatorTest, OutOfMemoryWaitsForPendingBlocksBeforeGivingThemBack) {
  StreamsBackend backend;
  backend.capacity = 8192;
  const CachingAllocator::Stream a = StreamNumber(1), b = StreamNumber(2);
  CachingAllocator cache(backend.MakeWithEvents());
  void* first = cache.Allocate(4096, a);
  void* second = cache.Allocate(4096, a);
  cache.Free(first);
  cache.Free(second);
  // Another class on b: the backend is full, the freed blocks' events pending; the cache waits for them, gives the
  // blocks back and the request fits.
  void* big = cache.Allocate(8192, b);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(backend.waits, 2);
  EXPECT_EQ(backend.releases, 2);
  EXPECT_TRUE(backend.stream_of.empty());
  cache.Free(big);
}

TEST(CachingAllocatorTest, ABackendGivesEveryEventHookOrNone) {
  StreamsBackend backend;
  CachingAllocator::Backend partial = backend.MakeWithEvents();
  partial.wait = nullptr;
  test::ExpectErrorContaining([&] { CachingAllocator cache(partial); }, {"all four event hooks or none"});
}

}  // namespace
}  // namespace crema
