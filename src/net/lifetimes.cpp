#include "net/lifetimes.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace crema {

namespace {

// Collects the touches of one pass, one entry per storage, in the order buffers are first met.
class Touches {
 public:
  // Positions only grow, and a step's reads are touched before its writes, so the first touch decides read_first.
  void Touch(const Net& net, int blob, bool gradient, int position, bool write) {
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
      buffer.bytes = static_cast<size_t>(b.count()) * sizeof(float);
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
    const Layer& layer = *net.layers()[step.layer];
    // In place, top and bottom are one blob (holding the top), touched where the layer reads it: a layer that
    // keeps a copy of its input reads the copy.
    const auto in_place = [&](size_t i) {
      return i < step.tops.size() && i < step.bottoms.size() && step.bottoms[i] == step.tops[i];
    };
    for (size_t t = 0; t < step.tops.size(); ++t) {
      touches.Touch(net, step.tops[t], true, position, kRead);
      const int index = static_cast<int>(t);
      if (in_place(t) ? layer.BackwardReadsInPlace(index) : layer.BackwardReadsTop(index))
        touches.Touch(net, step.tops[t], false, position, kRead);
    }
    for (size_t b = 0; b < step.bottoms.size(); ++b)
      if (!in_place(b) && layer.BackwardReadsBottom(static_cast<int>(b)))
        touches.Touch(net, step.bottoms[b], false, position, kRead);
    for (int id : step.internals) touches.Touch(net, id, false, position, kRead);
    for (size_t b = 0; b < step.bottoms.size(); ++b)
      if (b < step.propagate_down.size() && step.propagate_down[b])
        touches.Touch(net, step.bottoms[b], true, position, kWrite);
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
      for (int id : net.output_blob_indices()) touches.Touch(net, id, false, result.positions - 1, kRead);
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
