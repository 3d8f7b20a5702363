#include "net/schedule.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "net/net.hpp"

namespace crema {

namespace {

// A blob's values as one storage, named by the blob that holds them: a top that views a bottom's values (Flatten,
// Split's copies) is its bottom's storage. (By blob, not by memory: a bound plan puts many blobs in one arena.)
using Storage = int;

bool IsView(const PlanStep& step, size_t top) {
  return std::any_of(step.views.begin(), step.views.end(),
                     [&](const Layer::TopView& view) { return view.top == static_cast<int>(top); });
}

// What each step's forward writes and reads, and its backward reads, as storages; and every storage's forward
// writers, ascending.
struct Accesses {
  std::vector<std::vector<Storage>> writes, reads, backward_reads;
  std::map<Storage, std::vector<int>> writers;
  std::vector<size_t> bytes_written;

  explicit Accesses(const Net& net) {
    const std::vector<PlanStep>& plan = net.plan();
    const size_t steps = plan.size();
    writes.resize(steps);
    reads.resize(steps);
    backward_reads.resize(steps);
    bytes_written.assign(steps, 0);
    std::vector<int> root(net.blobs().size());
    for (size_t id = 0; id < root.size(); ++id) root[id] = static_cast<int>(id);
    const auto storage_of = [&](int id) { return root[id]; };
    for (size_t s = 0; s < steps; ++s) {
      const PlanStep& step = plan[s];
      const Layer& layer = *net.layers()[step.layer];
      for (const Layer::TopView& view : step.views) root[step.tops[view.top]] = root[step.bottoms[view.bottom]];
      const auto write = [&](int id) {
        const Storage storage = storage_of(id);
        writes[s].push_back(storage);
        std::vector<int>& list = writers[storage];
        if (list.empty() || list.back() != static_cast<int>(s)) list.push_back(static_cast<int>(s));
        bytes_written[s] += static_cast<size_t>(net.blobs()[id]->count()) * sizeof(float);
      };
      for (size_t t = 0; t < step.tops.size(); ++t)
        if (!IsView(step, t)) write(step.tops[t]);
      for (int id : step.internals) write(id);
      for (int id : step.bottoms) reads[s].push_back(storage_of(id));
      if (!step.needs_backward) continue;
      const auto in_place = [&](size_t i) {
        return i < step.tops.size() && i < step.bottoms.size() && step.bottoms[i] == step.tops[i];
      };
      for (size_t t = 0; t < step.tops.size(); ++t) {
        const int index = static_cast<int>(t);
        if (in_place(t) ? layer.BackwardReadsInPlace(index) : layer.BackwardReadsTop(index))
          backward_reads[s].push_back(storage_of(step.tops[t]));
      }
      for (size_t b = 0; b < step.bottoms.size(); ++b)
        if (!in_place(b) && layer.BackwardReadsBottom(static_cast<int>(b)))
          backward_reads[s].push_back(storage_of(step.bottoms[b]));
      for (int id : step.internals) backward_reads[s].push_back(storage_of(id));
    }
  }
};

// The steps of segment [begin, end) that must run forward again before its backward, or false in *exact when the
// replay could not give forward's values.
std::vector<int> SegmentReplay(const Accesses& access, const std::vector<bool>& recomputable, int begin, int end,
                               bool* exact) {
  std::vector<bool> replay(recomputable.size(), false);
  *exact = true;
  std::function<void(int)> replay_step;
  // The value of `storage` as forward left it just before step `before` (or at the end of the segment).
  const auto need = [&](const Storage& storage, int before) {
    const auto found = access.writers.find(storage);
    if (found == access.writers.end()) return;  // an input of the net: the caller's, kept
    const std::vector<int>& writers = found->second;
    int last = -1;
    for (int w : writers)
      if (w >= begin && w < before) last = w;
    if (last < 0 || replay[last]) return;  // from before the segment (a cut keeps it), or replayed already
    if (recomputable[last]) {
      replay_step(last);
    } else if (writers.back() != last) {
      *exact = false;  // written again after a step that cannot replay: the value is gone
    }
  };
  replay_step = [&](int s) {
    replay[s] = true;
    // Every later writer of what it writes (in place) replays too, so each blob ends as forward left it.
    for (const Storage& storage : access.writes[s])
      for (int w : access.writers.at(storage)) {
        if (w <= s || replay[w]) continue;
        if (recomputable[w]) {
          replay_step(w);
        } else {
          *exact = false;
        }
      }
    for (const Storage& storage : access.reads[s]) need(storage, s);
  };
  for (int s = end; s-- > begin;)
    for (const Storage& storage : access.backward_reads[s]) need(storage, end);
  std::vector<int> steps;
  for (int s = begin; s < end; ++s)
    if (replay[s]) steps.push_back(s);
  return steps;
}

}  // namespace

PassSchedule PlainSchedule(const Net& net, bool with_backward) {
  PassSchedule schedule;
  const int steps = static_cast<int>(net.plan().size());
  schedule.with_backward = with_backward;
  schedule.replayed.assign(steps, false);
  for (int s = 0; s < steps; ++s) schedule.events.push_back({PassEvent::Kind::kForward, s});
  if (with_backward)
    for (int s = steps; s-- > 0;) schedule.events.push_back({PassEvent::Kind::kBackward, s});
  return schedule;
}

std::vector<bool> RecomputableSteps(const Net& net, bool net_recomputes) {
  std::vector<bool> result;
  for (const PlanStep& step : net.plan()) {
    const Layer& layer = *net.layers()[step.layer];
    const LayerParameter& param = layer.layer_param();
    const bool wanted = param.has_recompute() ? param.recompute() : net_recomputes;
    result.push_back(wanted && !step.bottoms.empty() && layer.Replayable());
  }
  return result;
}

bool LayerMarkedRecompute(const Net& net) {
  for (const PlanStep& step : net.plan()) {
    const LayerParameter& param = net.layers()[step.layer]->layer_param();
    if (param.has_recompute() && param.recompute()) return true;
  }
  return false;
}

std::vector<int> SegmentCuts(const Net& net) {
  const Accesses access(net);
  const int steps = static_cast<int>(net.plan().size());
  // A cut at a is wrong where some storage is first written before a and written again at or after it.
  std::vector<int> crossing(steps + 1, 0);
  for (const auto& [storage, writers] : access.writers) {
    if (writers.front() == writers.back()) continue;
    ++crossing[writers.front() + 1];
    --crossing[writers.back() + 1];
  }
  std::vector<int> cuts;
  int open = 0;
  for (int a = 1; a < steps; ++a) {
    open += crossing[a];
    if (open == 0) cuts.push_back(a);
  }
  return cuts;
}

std::vector<int> GreedySegments(const Net& net, const std::vector<int>& cuts, double segment_bytes) {
  const Accesses access(net);
  std::vector<int> segments{0};
  double written = 0;
  size_t next_cut = 0;
  for (int s = 0; s < static_cast<int>(net.plan().size()); ++s) {
    written += static_cast<double>(access.bytes_written[s]);
    while (next_cut < cuts.size() && cuts[next_cut] <= s) ++next_cut;
    if (written > segment_bytes && next_cut < cuts.size() && cuts[next_cut] == s + 1) {
      segments.push_back(s + 1);
      written = 0;
    }
  }
  return segments;
}

PassSchedule RecomputeSchedule(const Net& net, std::vector<int> segments, const std::vector<bool>& recomputable,
                               int stored_tail) {
  PassSchedule schedule = PlainSchedule(net, false);
  schedule.with_backward = true;
  const int steps = static_cast<int>(net.plan().size());
  if (segments.empty() || segments.front() != 0) segments.insert(segments.begin(), 0);
  schedule.segments = segments;
  const Accesses access(net);
  const int count = static_cast<int>(segments.size());
  // The last segment is never replayed: its backward follows its forward at once.
  const int stored_from = count - std::max(stored_tail, 1);
  for (int k = count; k-- > 0;) {
    const int begin = segments[k], end = k + 1 < count ? segments[k + 1] : steps;
    bool exact = false;
    const std::vector<int> replay =
        k < stored_from ? SegmentReplay(access, recomputable, begin, end, &exact) : std::vector<int>{};
    if (exact) {
      for (int s : replay) {
        schedule.events.push_back({PassEvent::Kind::kReplay, s});
        schedule.replayed[s] = true;
        ++schedule.replays;
      }
    }
    for (int s = end; s-- > begin;) schedule.events.push_back({PassEvent::Kind::kBackward, s});
  }
  return schedule;
}

const char* EventName(PassEvent::Kind kind) {
  switch (kind) {
    case PassEvent::Kind::kForward:
      return "forward";
    case PassEvent::Kind::kReplay:
      return "replay";
    case PassEvent::Kind::kBackward:
      return "backward";
  }
  return "?";
}

}  // namespace crema
