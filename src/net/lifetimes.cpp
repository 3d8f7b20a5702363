#include "net/lifetimes.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

namespace crema {

namespace {

// Collects the touches of one pass, one entry per storage, in the order buffers are first met.
class Touches {
 public:
  // Positions only grow, and a step's reads are touched before its writes, so the first touch decides read_first.
  // `step`: the touch is a step's (listed in BufferLifetime::touches); the net's outputs, read once the pass has
  // ended, live to the last position but are read by no step there.
  void Touch(const Net& net, int blob, bool gradient, int position, bool write, bool step = true) {
    const Blob& b = *net.blobs()[blob];
    const SyncedMemory* memory = gradient ? b.diff().get() : b.data().get();
    if (memory == nullptr) return;  // a blob of no values
    // Under a memory plan many buffers lie in one arena: a buffer is a storage and where in it a blob starts.
    const size_t offset = gradient ? b.diff_offset() : b.data_offset();
    auto [found, inserted] = index_.emplace(std::make_pair(memory, offset), static_cast<int>(buffers_.size()));
    if (inserted) {
      BufferLifetime buffer;
      buffer.blob = net.blob_names()[blob];
      buffer.gradient = gradient;
      // What the blob's shape needs (an owner may hold more after shrinking; a slot of the arena is that much).
      // 8-bit data (core/element_type.hpp) takes a quarter of a float's bytes, bf16 data and gradients half.
      buffer.bytes = (gradient ? b.diff_floats() : b.data_floats()) * sizeof(float);
      buffer.first = buffer.last = position;
      buffer.read_first = !write;
      buffer.memory = memory;
      buffer.intervals.emplace_back(position, position);
      buffers_.push_back(buffer);
    }
    BufferLifetime& buffer = buffers_[found->second];
    // A write at a later position than any touch so far (no read of it there) starts the values anew.
    if (write && position > buffer.last) {
      buffer.intervals.emplace_back(position, position);
    } else {
      buffer.intervals.back().second = std::max(buffer.intervals.back().second, position);
    }
    buffer.first = std::min(buffer.first, position);
    buffer.last = std::max(buffer.last, position);
    if (std::find(buffer.blob_ids.begin(), buffer.blob_ids.end(), blob) == buffer.blob_ids.end())
      buffer.blob_ids.push_back(blob);
    if (step) buffer.touches.emplace_back(position, write);
  }
  std::vector<BufferLifetime> Take() { return std::move(buffers_); }

 private:
  std::map<std::pair<const SyncedMemory*, size_t>, int> index_;
  std::vector<BufferLifetime> buffers_;
};

}  // namespace

NetLifetimes ComputeLifetimes(const Net& net, const PassSchedule& schedule) {
  const std::vector<PlanStep>& plan = net.plan();
  const int steps = static_cast<int>(plan.size());
  NetLifetimes result;
  result.positions = static_cast<int>(schedule.events.size());
  if (steps == 0) return result;
  Touches touches;
  std::map<const Blob*, int> id_of;
  for (size_t id = 0; id < net.blobs().size(); ++id) id_of[net.blobs()[id].get()] = static_cast<int>(id);
  // The caller fills the inputs before the first step.
  constexpr bool kRead = false, kWrite = true;
  for (const Blob* input : net.input_blobs()) touches.Touch(net, id_of.at(input), false, 0, kRead);
  const auto forward = [&](int s, int position) {
    const PlanStep& step = plan[s];
    const Layer& layer = *net.layers()[step.layer];
    for (int id : step.bottoms) touches.Touch(net, id, false, position, kRead);
    // Internal blobs: written first where the layer declares Forward writes them whole for its Backward; else they
    // may carry state from the last pass (a recurrent layer's carried state), read first.
    for (size_t k = 0; k < step.internals.size(); ++k)
      touches.Touch(net, step.internals[k], false, position,
                    layer.internal_blob_lifetime(static_cast<int>(k)) == Layer::InternalLifetime::kUntilBackward);
    for (size_t t = 0; t < step.tops.size(); ++t) {
      touches.Touch(net, step.tops[t], false, position, kWrite);
      if (schedule.with_backward && layer.loss(static_cast<int>(t)) != 0.f)
        touches.Touch(net, step.tops[t], true, position, kWrite);
    }
  };
  const auto backward = [&](int s, int position) {
    const PlanStep& step = plan[s];
    if (!step.needs_backward) return;
    ForEachBackwardTouch(net, step,
                         [&](int id, bool gradient, bool write) { touches.Touch(net, id, gradient, position, write); });
  };
  const int forward_end = std::min(steps, result.positions) - 1;
  for (int position = 0; position < result.positions; ++position) {
    const PassEvent& event = schedule.events[position];
    if (event.kind == PassEvent::Kind::kBackward) {
      backward(event.step, position);
    } else {
      forward(event.step, position);
    }
    // The net's outputs are read once forward ends, and stay readable to the end of the pass.
    if (position == forward_end)
      for (int id : net.output_blob_indices())
        touches.Touch(net, id, false, result.positions - 1, kRead, /*step=*/false);
  }
  result.buffers = touches.Take();
  // Live bytes at each position, from each buffer's first to its last.
  std::vector<long long> change(result.positions + 1, 0);
  for (const BufferLifetime& buffer : result.buffers) {
    result.total_bytes += buffer.bytes;
    for (const auto& [first, last] : buffer.intervals) {
      change[first] += static_cast<long long>(buffer.bytes);
      change[last + 1] -= static_cast<long long>(buffer.bytes);
    }
  }
  long long live = 0;
  for (int position = 0; position < result.positions; ++position) {
    live += change[position];
    if (static_cast<size_t>(live) > result.peak_live_bytes) {
      result.peak_live_bytes = static_cast<size_t>(live);
      result.peak_position = position;
    }
  }
  return result;
}

PassOrder::PassOrder(int positions)
    : positions_(positions),
      words_((positions + 63) / 64),
      before_(static_cast<size_t>(positions) * words_, 0),
      after_(static_cast<size_t>(positions) * words_, 0) {}

void PassOrder::AddEdge(int from, int to) {
  if (from == to) return;
  if (from > to) std::swap(from, to);  // an edge never points back in the schedule's order
  edges_.emplace_back(from, to);
}

void PassOrder::AddBarrier(int at) {
  if (at > 0 && at < positions_) barriers_.push_back(at);
}

void PassOrder::Close() {
  std::sort(edges_.begin(), edges_.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::sort(barriers_.begin(), barriers_.end());
  // Edges point forward in position, so a sweep in order of position sees each predecessor complete: a position
  // comes after everything before the last barrier at or before it, and after each edge's source and what that
  // comes after.
  size_t edge = 0, barrier = 0;
  int fence = 0;  // every position before it comes before this one
  for (int q = 0; q < positions_; ++q) {
    uint64_t* into = &before_[static_cast<size_t>(q) * words_];
    while (barrier < barriers_.size() && barriers_[barrier] <= q) fence = barriers_[barrier++];
    for (int p = 0; p < fence; p += 64) {
      const int bits = std::min(64, fence - p);
      into[p / 64] |= bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    }
    for (; edge < edges_.size() && edges_[edge].second == q; ++edge) {
      const int from = edges_[edge].first;
      const uint64_t* from_before = &before_[static_cast<size_t>(from) * words_];
      for (size_t w = 0; w < words_; ++w) into[w] |= from_before[w];
      into[from / 64] |= uint64_t{1} << (from % 64);
    }
  }
  for (int q = 0; q < positions_; ++q)
    for (int p = 0; p < q; ++p)
      if (Before(p, q)) after_[static_cast<size_t>(p) * words_ + q / 64] |= uint64_t{1} << (q % 64);
  edges_.clear();
  barriers_.clear();
}

bool PassOrder::Before(int p, int q) const {
  return p < q && (before_[static_cast<size_t>(q) * words_ + p / 64] >> (p % 64) & 1) != 0;
}

void PassOrder::AddUnorderedWith(int p, std::vector<uint64_t>* bits) const {
  bits->resize(words_, 0);
  const uint64_t* before = &before_[static_cast<size_t>(p) * words_];
  const uint64_t* after = &after_[static_cast<size_t>(p) * words_];
  for (size_t w = 0; w < words_; ++w) {
    uint64_t ordered = before[w] | after[w];
    if (w == static_cast<size_t>(p / 64)) ordered |= uint64_t{1} << (p % 64);
    // Positions past the end are not events.
    if (w + 1 == words_ && positions_ % 64 != 0) ordered |= ~uint64_t{0} << (positions_ % 64);
    (*bits)[w] |= ~ordered;
  }
}

PassOrder ComputePassOrder(const Net& net, const PassSchedule& schedule, const NetLifetimes& lifetimes) {
  PassOrder order(lifetimes.positions);
  const std::vector<PlanStep>& plan = net.plan();
  // Backward (and a recompute pass's replays) begins once forward has ended: they are two calls.
  order.AddBarrier(static_cast<int>(plan.size()));
  // One buffer: a write comes before every later touch, a read before every later write (the closure gives the
  // rest). Touches at one position are one event's.
  for (const BufferLifetime& buffer : lifetimes.buffers) {
    std::vector<std::pair<int, bool>> touches = buffer.touches;
    std::sort(touches.begin(), touches.end());
    int last_write = -1;
    std::vector<int> reads_since;  // reads after the last write
    for (const auto& [position, write] : touches) {
      if (last_write >= 0) order.AddEdge(last_write, position);
      if (write) {
        for (int read : reads_since) order.AddEdge(read, position);
        reads_since.clear();
        last_write = position;
      } else {
        reads_since.push_back(position);
      }
    }
  }
  // What the lifetimes leave out: parameters' gradients (backward accumulates into them: shared parameters' steps one
  // after another), parameters a forward writes (BatchNorm's statistics), and steps with effects beyond their blobs.
  std::map<const void*, int> last_at;
  for (int position = 0; position < lifetimes.positions && position < static_cast<int>(schedule.events.size());
       ++position) {
    const PassEvent& event = schedule.events[position];
    const PlanStep& step = plan[event.step];
    const Layer& layer = *net.layers()[step.layer];
    const bool backward = event.kind == PassEvent::Kind::kBackward;
    if (backward && !step.needs_backward) continue;
    std::vector<const void*> keys;
    for (const auto& param : layer.params())
      if (backward ? param->diff() != nullptr : (StepWritesParams(layer) && param->data() != nullptr))
        keys.push_back(backward ? static_cast<const void*>(param->diff().get()) : param->data().get());
    if (StepHasOutsideEffects(layer, step)) keys.push_back(&order);  // one key for every such step
    for (const void* key : keys) {
      auto [found, inserted] = last_at.emplace(key, position);
      if (!inserted) {
        order.AddEdge(found->second, position);
        found->second = position;
      }
    }
  }
  order.Close();
  return order;
}

void ForEachBackwardTouch(const Net& net, const PlanStep& step,
                          const std::function<void(int id, bool gradient, bool write)>& touch) {
  const Layer& layer = *net.layers()[step.layer];
  // In place, top and bottom are one blob (holding the top), touched where the layer reads it: a layer that keeps a
  // copy of its input reads the copy.
  const auto in_place = [&](size_t i) {
    return i < step.tops.size() && i < step.bottoms.size() && step.bottoms[i] == step.tops[i];
  };
  for (size_t t = 0; t < step.tops.size(); ++t) {
    touch(step.tops[t], true, false);
    const int index = static_cast<int>(t);
    if (in_place(t) ? layer.BackwardReadsInPlace(index) : layer.BackwardReadsTop(index))
      touch(step.tops[t], false, false);
  }
  for (size_t b = 0; b < step.bottoms.size(); ++b)
    if (!in_place(b) && layer.BackwardReadsBottom(static_cast<int>(b))) touch(step.bottoms[b], false, false);
  for (int id : step.internals) touch(id, false, false);
  for (size_t b = 0; b < step.bottoms.size(); ++b)
    if (b < step.propagate_down.size() && step.propagate_down[b]) touch(step.bottoms[b], true, true);
}

bool StepHasOutsideEffects(const Layer& layer, const PlanStep& step) {
  return step.bottoms.empty() || std::strcmp(layer.type(), "Python") == 0;
}

bool StepWritesParams(const Layer& layer) { return std::strcmp(layer.type(), "BatchNorm") == 0; }

NetLifetimes ComputeLifetimes(const Net& net, bool with_backward) {
  return ComputeLifetimes(net, PlainSchedule(net, with_backward));
}

bool IntervalsOverlap(const std::vector<std::pair<int, int>>& a, const std::vector<std::pair<int, int>>& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].first <= b[j].second && b[j].first <= a[i].second) return true;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

}  // namespace crema
