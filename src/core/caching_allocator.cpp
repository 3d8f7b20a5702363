#include "core/caching_allocator.hpp"

#include <algorithm>
#include <utility>

#include "core/common.hpp"

namespace crema {

size_t CachingAllocator::SizeClass(size_t bytes) {
  constexpr size_t kSmallStep = 512, kLarge = size_t{1} << 20;
  if (bytes < kLarge) return std::max<size_t>((bytes + kSmallStep - 1) / kSmallStep, 1) * kSmallStep;
  size_t power = kLarge;
  while (power * 2 <= bytes) power *= 2;
  // power <= bytes < 2 * power: the next quarter step of the power.
  const size_t quarter = power / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

CachingAllocator::CachingAllocator(Backend backend) : backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() { ReleaseCached(); }

void* CachingAllocator::Allocate(size_t bytes) {
  const size_t size = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  auto cached = cached_.find(size);
  if (cached != cached_.end()) {
    block = cached->second;
    cached_.erase(cached);
  } else {
    block = backend_.allocate(size);
    if (block == nullptr && !cached_.empty()) {
      ReleaseCachedLocked();
      block = backend_.allocate(size);
    }
    if (block == nullptr) return nullptr;
    ++stats_.backend_allocations;
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  in_use_[block] = size;
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return block;
}

void CachingAllocator::Free(void* block) {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = in_use_.find(block);
  CREMA_CHECK(found != in_use_.end()) << "CachingAllocator::Free: a block it did not hand out (or freed twice)";
  cached_.emplace(found->second, block);
  stats_.in_use -= found->second;
  in_use_.erase(found);
}

void CachingAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
}

void CachingAllocator::ReleaseCachedLocked() {
  for (const auto& [size, block] : cached_) {
    backend_.release(block);
    stats_.reserved -= size;
  }
  cached_.clear();
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

}  // namespace crema
