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

CachingAllocator::CachingAllocator(Backend backend) : backend_(std::move(backend)) {
  const int hooks = static_cast<int>(static_cast<bool>(backend_.record)) + static_cast<bool>(backend_.done) +
                    static_cast<bool>(backend_.wait) + static_cast<bool>(backend_.forget);
  CREMA_CHECK(hooks == 0 || hooks == 4) << "CachingAllocator: a backend gives all four event hooks or none";
}

CachingAllocator::~CachingAllocator() { ReleaseCached(); }

bool CachingAllocator::ReadyFor(Block* block, Stream stream) {
  bool ready = true;
  auto& pending = block->pending;
  for (size_t i = 0; i < pending.size();) {
    // The home stream's own event need not be done for a request on the home stream: its work queues after it.
    if (pending[i].first == stream && stream == block->home) {
      ++i;
      continue;
    }
    if (backend_.done(pending[i].second)) {
      backend_.forget(pending[i].second);
      pending.erase(pending.begin() + static_cast<long>(i));
    } else {
      ready = false;
      ++i;
    }
  }
  return ready;
}

void* CachingAllocator::Allocate(size_t bytes, Stream stream) {
  const size_t size = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* found = nullptr;
  // A block freed on this stream first (no event to wait for), then any whose events are done.
  const auto [first, last] = cached_.equal_range(size);
  auto take = last;
  for (int round = 0; round < 2 && take == last; ++round)
    for (auto candidate = first; candidate != last && take == last; ++candidate) {
      Block& block = blocks_.at(candidate->second);
      if ((round == 0) != (block.home == stream)) continue;
      if (ReadyFor(&block, stream)) take = candidate;
    }
  if (take != last) {
    found = take->second;
    cached_.erase(take);
  } else {
    found = backend_.allocate(size);
    if (found == nullptr && !cached_.empty()) {
      ReleaseCachedLocked();
      found = backend_.allocate(size);
    }
    if (found == nullptr) return nullptr;
    ++stats_.backend_allocations;
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  Block& block = blocks_[found];
  // Events still pending belong to the home stream, which this request is on: they are no longer needed.
  for (const auto& [pending_stream, event] : block.pending) backend_.forget(event);
  block = Block{};
  block.size = size;
  block.home = stream;
  block.in_use = true;
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return found;
}

void CachingAllocator::RecordUse(void* block, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = blocks_.find(block);
  CREMA_CHECK(found != blocks_.end() && found->second.in_use) << "CachingAllocator::RecordUse: a block not in use";
  Block& held = found->second;
  if (stream != held.home && std::find(held.uses.begin(), held.uses.end(), stream) == held.uses.end())
    held.uses.push_back(stream);
}

void CachingAllocator::Free(void* block) {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = blocks_.find(block);
  CREMA_CHECK(found != blocks_.end() && found->second.in_use)
      << "CachingAllocator::Free: a block it did not hand out (or freed twice)";
  Block& held = found->second;
  if (streams()) {
    held.pending.emplace_back(held.home, backend_.record(held.home));
    for (Stream stream : held.uses) held.pending.emplace_back(stream, backend_.record(stream));
  }
  held.uses.clear();
  held.in_use = false;
  cached_.emplace(held.size, block);
  stats_.in_use -= held.size;
}

void CachingAllocator::ForgetStream(Stream stream) {
  if (stream == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [pointer, block] : blocks_) {
    if (block.home == stream) block.home = nullptr;
    block.uses.erase(std::remove(block.uses.begin(), block.uses.end(), stream), block.uses.end());
    // Its events have completed with the stream's work; as the default stream's they are waited for as any other.
    for (auto& [pending_stream, event] : block.pending)
      if (pending_stream == stream) pending_stream = nullptr;
  }
}

void CachingAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
}

void CachingAllocator::ReleaseCachedLocked() {
  for (const auto& [size, block] : cached_) {
    auto found = blocks_.find(block);
    for (const auto& [stream, event] : found->second.pending) {
      backend_.wait(event);
      backend_.forget(event);
    }
    blocks_.erase(found);
    backend_.release(block);
    stats_.reserved -= size;
  }
  cached_.clear();
}

size_t CachingAllocator::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& [size, block] : cached_) count += !blocks_.at(block).pending.empty();
  return count;
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
