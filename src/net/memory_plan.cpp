#include "net/memory_plan.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace crema {

namespace {

size_t RoundUp(size_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// The blob among `buffer`'s users that owns its storage (its data or gradient is no view), or -1.
int OwnerOf(const Net& net, const BufferLifetime& buffer) {
  for (int id : buffer.blob_ids) {
    const Blob& blob = *net.blobs()[id];
    if (buffer.gradient ? !blob.diff_is_view() && blob.diff().get() == buffer.memory
                        : !blob.data_is_view() && blob.data().get() == buffer.memory)
      return id;
  }
  return -1;
}

// Union-find over buffer indices: an in-place chain is one group, placed once.
int Root(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::string MemoryPlanRefusal(const Net& net) {
  for (const PlanStep& step : net.plan()) {
    const Layer& layer = *net.layers()[step.layer];
    if (layer.ReshapesOnData())
      return "layer '" + layer.name() + "' (" + layer.type() +
             ") gives its tops shapes that follow its bottoms' values";
  }
  return "";
}

MemoryPlan ComputeMemoryPlan(const Net& net, const MemoryPlanOptions& options) {
  MemoryPlan plan;
  plan.lifetimes = ComputeLifetimes(net, options.with_backward);
  const NetLifetimes& lifetimes = plan.lifetimes;
  plan.with_backward = options.with_backward;
  plan.unplanned_bytes = lifetimes.total_bytes;
  const int steps = static_cast<int>(net.plan().size());

  // Blobs whose values someone outside the pass reads, or fills: each keeps memory of its own.
  std::set<int> kept = options.keep;
  for (int id : net.output_blob_indices()) kept.insert(id);
  std::set<int> carried;  // internal blobs that carry values from one pass into the next
  for (const PlanStep& step : net.plan()) {
    if (step.bottoms.empty()) kept.insert(step.tops.begin(), step.tops.end());
    const Layer& layer = *net.layers()[step.layer];
    for (size_t k = 0; k < step.internals.size(); ++k)
      if (layer.internal_blob_lifetime(static_cast<int>(k)) != Layer::InternalLifetime::kUntilBackward)
        carried.insert(step.internals[k]);
  }

  // The buffers the plan moves, and where each is in `lifetimes.buffers`.
  std::vector<const BufferLifetime*> movable;
  std::map<const SyncedMemory*, int> index_of;  // storage (with data/gradient implied) -> index into movable
  for (const BufferLifetime& buffer : lifetimes.buffers) {
    const int owner = OwnerOf(net, buffer);
    bool move = owner >= 0 && !buffer.read_first && buffer.bytes > 0;
    for (int id : buffer.blob_ids) move = move && !carried.count(id) && (buffer.gradient || !kept.count(id));
    if (!move) {
      plan.kept_bytes += buffer.bytes;
      continue;
    }
    index_of[buffer.memory] = static_cast<int>(movable.size());
    movable.push_back(&buffer);
    PlannedBuffer planned;
    planned.memory = buffer.memory;
    planned.owner = owner;
    planned.blob_ids = buffer.blob_ids;
    planned.gradient = buffer.gradient;
    planned.bytes = buffer.bytes;
    planned.first = buffer.first;
    planned.last = buffer.last;
    plan.buffers.push_back(planned);
  }
  const int n = static_cast<int>(plan.buffers.size());

  // In place: at a step whose layer allows it, top i takes the memory of bottom i when this step is the last to
  // touch the bottom and the first to touch the top (backward: bottom i's gradient takes top i's).
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> handed_on(n, false);  // a buffer gives its memory to one successor at most
  auto merge = [&](const SyncedMemory* from, const SyncedMemory* to, int position) {
    auto a = index_of.find(from), b = index_of.find(to);
    if (a == index_of.end() || b == index_of.end() || a->second == b->second) return;
    PlannedBuffer& giver = plan.buffers[a->second];
    PlannedBuffer& taker = plan.buffers[b->second];
    if (giver.last != position || taker.first != position || handed_on[a->second] || taker.bytes > giver.bytes) return;
    handed_on[a->second] = true;
    taker.in_place = true;
    parent[Root(parent, b->second)] = Root(parent, a->second);
  };
  for (int s = 0; s < steps; ++s) {
    const PlanStep& step = net.plan()[s];
    const Layer& layer = *net.layers()[step.layer];
    if (!layer.PlanMayRunInPlace()) continue;
    const size_t pairs = std::min(step.bottoms.size(), step.tops.size());
    for (size_t i = 0; i < pairs; ++i) {
      const Blob& bottom = *net.blobs()[step.bottoms[i]];
      const Blob& top = *net.blobs()[step.tops[i]];
      merge(bottom.data().get(), top.data().get(), s);
      if (options.with_backward && step.needs_backward && i < step.propagate_down.size() && step.propagate_down[i])
        merge(top.diff().get(), bottom.diff().get(), 2 * steps - 1 - s);
    }
  }

  // Groups: the members' lifetimes joined, the largest member's size.
  struct Group {
    size_t bytes = 0;
    int first = 0, last = 0;
    size_t offset = 0;
    std::vector<int> members;
  };
  std::map<int, Group> groups;
  for (int i = 0; i < n; ++i) {
    Group& group = groups[Root(parent, i)];
    const PlannedBuffer& buffer = plan.buffers[i];
    if (group.members.empty()) {
      group.first = buffer.first;
      group.last = buffer.last;
    }
    group.bytes = std::max(group.bytes, RoundUp(buffer.bytes));
    group.first = std::min(group.first, buffer.first);
    group.last = std::max(group.last, buffer.last);
    group.members.push_back(i);
  }
  std::vector<Group*> order;
  for (auto& [root, group] : groups) order.push_back(&group);
  std::stable_sort(order.begin(), order.end(), [](const Group* a, const Group* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->first < b->first;
  });
  std::vector<const Group*> placed;
  for (Group* group : order) {
    // The ranges taken, during this group's life, by groups already placed.
    std::vector<std::pair<size_t, size_t>> taken;
    for (const Group* other : placed)
      if (other->first <= group->last && group->first <= other->last)
        taken.emplace_back(other->offset, other->offset + other->bytes);
    std::sort(taken.begin(), taken.end());
    size_t best = 0, best_gap = SIZE_MAX, cursor = 0;
    bool found = false;
    for (const auto& [begin, end] : taken) {
      if (begin > cursor && begin - cursor >= group->bytes && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
        found = true;
      }
      cursor = std::max(cursor, end);
    }
    group->offset = found ? best : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, group->offset + group->bytes);
    placed.push_back(group);
  }
  for (const auto& [root, group] : groups)
    for (int i : group.members) plan.buffers[i].offset = group.offset;
  for (const PlannedBuffer& buffer : plan.buffers) plan.in_place += buffer.in_place ? 1 : 0;

  // Which buffers' bytes a later forward write reuses.
  for (PlannedBuffer& buffer : plan.buffers) {
    for (const PlannedBuffer& other : plan.buffers) {
      if (&other == &buffer || other.first <= buffer.first || other.first >= steps) continue;
      if (other.offset < buffer.offset + buffer.bytes && buffer.offset < other.offset + other.bytes) {
        buffer.reused_in_forward = true;
        break;
      }
    }
  }
  return plan;
}

}  // namespace crema
