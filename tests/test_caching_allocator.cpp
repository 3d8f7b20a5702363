#include "core/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace crema
