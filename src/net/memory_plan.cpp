#include "net/memory_plan.hpp"

#include <algorithm>
#include <cmath>
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
  plan.schedule = options.schedule.events.empty() ? PlainSchedule(net, options.with_backward) : options.schedule;
  plan.lifetimes = ComputeLifetimes(net, plan.schedule);
  const NetLifetimes& lifetimes = plan.lifetimes;
  plan.with_backward = plan.schedule.with_backward;
  plan.unplanned_bytes = lifetimes.total_bytes;
  const int steps = static_cast<int>(net.plan().size());

  // Blobs whose values someone outside the pass reads, or fills: each keeps memory of its own.
  std::set<int> kept = options.keep;
  for (int id : net.output_blob_indices()) kept.insert(id);
  // The net's inputs keep their gradients too: the caller reshapes an input blob itself (its gradient must be able
  // to grow with it), and reads its gradient after backward.
  std::set<int> inputs;
  for (size_t id = 0; id < net.blobs().size(); ++id)
    for (const Blob* input : net.input_blobs())
      if (net.blobs()[id].get() == input) inputs.insert(static_cast<int>(id));
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
    for (int id : buffer.blob_ids)
      move = move && !carried.count(id) && (buffer.gradient ? !inputs.count(id) : !kept.count(id));
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
    planned.intervals = buffer.intervals;
    plan.buffers.push_back(planned);
  }
  const int n = static_cast<int>(plan.buffers.size());
  // With lanes, which events may run at once: bytes are shared only between buffers whose touches are all ordered.
  PassOrder order;
  if (options.concurrent) order = ComputePassOrder(net, plan.schedule, lifetimes);
  plan.concurrent = options.concurrent;

  // In place: at a step whose layer allows it, top i takes the memory of bottom i when this step is the last to
  // touch the bottom and the first to touch the top (backward: bottom i's gradient takes top i's). In a recompute
  // pass the step runs twice (forward, replay), and the two may meet at each; they must not overlap elsewhere.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<std::vector<std::pair<int, int>>> group_intervals(n);  // per root: its members' intervals
  for (int i = 0; i < n; ++i) group_intervals[i] = plan.buffers[i].intervals;
  std::vector<bool> handed_on(n, false);  // a buffer gives its memory to one successor at most
  // Whether the intervals of a giver's group and a taker's group meet only where one ends and the other begins, at
  // one of `positions`.
  const auto meet_only_at = [](const std::vector<std::pair<int, int>>& giver,
                               const std::vector<std::pair<int, int>>& taker, const std::vector<int>& positions) {
    for (const auto& g : giver)
      for (const auto& t : taker) {
        if (g.second < t.first || t.second < g.first) continue;
        if (g.second != t.first || std::find(positions.begin(), positions.end(), t.first) == positions.end())
          return false;
      }
    return true;
  };
  auto merge = [&](const SyncedMemory* from, const SyncedMemory* to, const std::vector<int>& positions) {
    auto a = index_of.find(from), b = index_of.find(to);
    if (a == index_of.end() || b == index_of.end() || a->second == b->second) return;
    PlannedBuffer& giver = plan.buffers[a->second];
    PlannedBuffer& taker = plan.buffers[b->second];
    const int giver_root = Root(parent, a->second), taker_root = Root(parent, b->second);
    if (giver_root == taker_root || handed_on[a->second] || taker.bytes > giver.bytes) return;
    if (std::find(positions.begin(), positions.end(), giver.last) == positions.end() ||
        std::find(positions.begin(), positions.end(), taker.first) == positions.end() ||
        !meet_only_at(group_intervals[giver_root], group_intervals[taker_root], positions))
      return;
    // With lanes, "the last to touch the bottom" must hold in every order the lanes may take: every other touch of
    // the giver comes before this step, and every other touch of the taker after it.
    if (options.concurrent) {
      const int at = giver.last;
      for (const auto& [position, write] : movable[a->second]->touches)
        if (position != at && !order.Before(position, at)) return;
      for (const auto& [position, write] : movable[b->second]->touches)
        if (position != at && !order.Before(at, position)) return;
    }
    handed_on[a->second] = true;
    taker.in_place = true;
    parent[taker_root] = giver_root;
    std::vector<std::pair<int, int>>& joined = group_intervals[giver_root];
    joined.insert(joined.end(), group_intervals[taker_root].begin(), group_intervals[taker_root].end());
    std::sort(joined.begin(), joined.end());
    group_intervals[taker_root].clear();
  };
  // Where each step runs forward (and replays), and backward.
  std::vector<std::vector<int>> forward_at(steps), backward_at(steps);
  for (size_t position = 0; position < plan.schedule.events.size(); ++position) {
    const PassEvent& event = plan.schedule.events[position];
    (event.kind == PassEvent::Kind::kBackward ? backward_at : forward_at)[event.step].push_back(
        static_cast<int>(position));
  }
  for (int s = 0; s < steps; ++s) {
    const PlanStep& step = net.plan()[s];
    const Layer& layer = *net.layers()[step.layer];
    if (!layer.PlanMayRunInPlace()) continue;
    const size_t pairs = std::min(step.bottoms.size(), step.tops.size());
    for (size_t i = 0; i < pairs; ++i) {
      const Blob& bottom = *net.blobs()[step.bottoms[i]];
      const Blob& top = *net.blobs()[step.tops[i]];
      // In one element type only: a layer in place reads each value before writing the one at its place, which
      // holds where both lie at the same offsets.
      if (bottom.data_type() == top.data_type()) merge(bottom.data().get(), top.data().get(), forward_at[s]);
      if (plan.with_backward && step.needs_backward && i < step.propagate_down.size() && step.propagate_down[i] &&
          bottom.diff_type() == top.diff_type())
        merge(top.diff().get(), bottom.diff().get(), backward_at[s]);
    }
  }
  // A fused sum the engine adds into its output's memory (forward only): the output takes the summand's memory
  // where the summand's values die there, in the same layout and element type (an 8-bit engine scales them there).
  for (int s = 0; s < steps && !plan.with_backward; ++s) {
    const PlanStep& step = net.plan()[s];
    const Layer& layer = *net.layers()[step.layer];
    if (!layer.fused_sum() || !layer.SumsIntoSummandMemory() || step.tops.empty()) continue;
    // Not where the layer also reads the summand as an input of its own (x + conv(x)), which the output would
    // overwrite while the engine reads it.
    const int id = step.bottoms.back();
    if (std::count(step.bottoms.begin(), step.bottoms.end(), id) > 1) continue;
    const Blob& summand = *net.blobs()[id];
    const Blob& top = *net.blobs()[step.tops[0]];
    if (summand.layout() == top.layout() && summand.shape() == top.shape() && summand.data_type() == top.data_type())
      merge(summand.data().get(), top.data().get(), forward_at[s]);
  }

  // Groups: the members' lifetimes joined, the largest member's size.
  struct Group {
    size_t bytes = 0;
    int first = 0, last = 0;
    std::vector<std::pair<int, int>> intervals;
    size_t offset = 0;
    std::vector<int> members;
    int workspace = -1;  // or the index of a step's workspace (plan.workspaces)
    std::vector<int> touched_at;       // with lanes: the positions its members are touched at
    std::vector<uint64_t> concurrent;  // with lanes: a bit for every position that may run alongside one of those
  };
  std::map<int, Group> groups;
  for (int i = 0; i < n; ++i) {
    const int root = Root(parent, i);
    Group& group = groups[root];
    const PlannedBuffer& buffer = plan.buffers[i];
    if (group.members.empty()) {
      group.first = buffer.first;
      group.last = buffer.last;
      group.intervals = group_intervals[root];
    }
    group.bytes = std::max(group.bytes, RoundUp(buffer.bytes));
    group.first = std::min(group.first, buffer.first);
    group.last = std::max(group.last, buffer.last);
    group.members.push_back(i);
    if (options.concurrent)
      for (const auto& [position, write] : movable[i]->touches) group.touched_at.push_back(position);
  }
  // Each step's workspace: scratch for its layer's calls, live only where the step runs (forward, replay, backward).
  for (int s = 0; s < steps; ++s) {
    const size_t floats = net.layers()[net.plan()[s].layer]->workspace_floats();
    if (floats == 0) continue;
    PlannedWorkspace workspace;
    workspace.step = s;
    workspace.bytes = floats * sizeof(float);
    workspace.positions = forward_at[s];
    if (plan.with_backward && net.plan()[s].needs_backward)
      workspace.positions.insert(workspace.positions.end(), backward_at[s].begin(), backward_at[s].end());
    std::sort(workspace.positions.begin(), workspace.positions.end());
    Group& group = groups[n + static_cast<int>(plan.workspaces.size())];
    group.bytes = RoundUp(workspace.bytes);
    group.first = workspace.positions.front();
    group.last = workspace.positions.back();
    for (int position : workspace.positions) group.intervals.emplace_back(position, position);
    group.workspace = static_cast<int>(plan.workspaces.size());
    if (options.concurrent) group.touched_at = workspace.positions;
    plan.unplanned_workspace_bytes = std::max(plan.unplanned_workspace_bytes, workspace.bytes);
    plan.workspaces.push_back(workspace);
  }
  plan.unplanned_bytes += plan.unplanned_workspace_bytes;
  std::vector<Group*> by_size;
  for (auto& [root, group] : groups) by_size.push_back(&group);
  std::stable_sort(by_size.begin(), by_size.end(), [](const Group* a, const Group* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->first < b->first;
  });
  if (options.concurrent)
    for (auto& [root, group] : groups)
      for (int position : group.touched_at) order.AddUnorderedWith(position, &group.concurrent);
  // Whether two groups may be live at once: their lifetimes in the schedule's order overlap, or (lanes) an event
  // touching one may run alongside an event touching the other.
  const auto live_together = [&](const Group& a, const Group& b) {
    if (a.first <= b.last && b.first <= a.last && IntervalsOverlap(a.intervals, b.intervals)) return true;
    if (!options.concurrent) return false;
    for (int position : b.touched_at)
      if (a.concurrent[position / 64] >> (position % 64) & 1) return true;
    return false;
  };
  std::vector<const Group*> placed;
  for (Group* group : by_size) {
    // The ranges taken, during this group's life, by groups already placed.
    std::vector<std::pair<size_t, size_t>> taken;
    for (const Group* other : placed)
      if (live_together(*other, *group)) taken.emplace_back(other->offset, other->offset + other->bytes);
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
  for (const auto& [root, group] : groups) {
    for (int i : group.members) plan.buffers[i].offset = group.offset;
    if (group.workspace >= 0) plan.workspaces[group.workspace].offset = group.offset;
  }
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

MemoryPlan ComputeRecomputePlan(const Net& net, const MemoryPlanOptions& options, const RecomputeOptions& recompute) {
  MemoryPlanOptions plain = options;
  plain.with_backward = true;
  plain.schedule = PassSchedule();
  const MemoryPlan stored = ComputeMemoryPlan(net, plain);
  MemoryPlan best = stored;
  const bool any =
      std::find(recompute.recomputable.begin(), recompute.recomputable.end(), true) != recompute.recomputable.end();
  const std::vector<int> cuts = SegmentCuts(net);
  const int steps = static_cast<int>(net.plan().size());
  if (!any || cuts.empty() || steps == 0) return best;
  // Chen et al.'s rule: n steps of m bytes each in sqrt(n) segments of sqrt(n) m bytes.
  double total = 0;
  for (const BufferLifetime& buffer : ComputeLifetimes(net, false).buffers) total += static_cast<double>(buffer.bytes);
  const double rule = total / std::sqrt(static_cast<double>(steps));
  const auto plan_for = [&](const std::vector<int>& segments, int stored_tail) {
    MemoryPlanOptions with = plain;
    with.schedule = RecomputeSchedule(net, segments, recompute.recomputable, stored_tail);
    return ComputeMemoryPlan(net, with);
  };
  std::vector<int> chosen;
  for (double scale : {0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0}) {
    const std::vector<int> segments = GreedySegments(net, cuts, rule * scale);
    if (segments.size() < 2) continue;
    MemoryPlan candidate = plan_for(segments, 0);
    if (candidate.schedule.replays == 0 || candidate.planned_bytes() >= best.planned_bytes()) continue;
    best = std::move(candidate);
    chosen = segments;
  }
  if (chosen.empty()) return best;
  // Store whole the most segments backward reaches first that keep the plan within the limit: the budget, or without
  // one (or below the least the segments give) the least they give: a segment whose values cost no byte at the peak
  // is not run twice. (The plan grows with each stored segment; a binary search over how many.)
  const size_t limit = std::max(recompute.budget_bytes, best.planned_bytes());
  if (stored.planned_bytes() <= limit) return stored;
  int low = 1, high = static_cast<int>(chosen.size());  // `low` fits (the last segment is always stored)
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    MemoryPlan candidate = plan_for(chosen, middle);
    if (candidate.planned_bytes() <= limit) {
      low = middle;
      best = std::move(candidate);
    } else {
      high = middle;
    }
  }
  return best;
}

}  // namespace crema
