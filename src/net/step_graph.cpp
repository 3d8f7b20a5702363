#include "net/step_graph.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "net/lifetimes.hpp"
#include "net/net.hpp"

namespace crema {

namespace {

using Range = StepRange;

bool Overlaps(const Range& a, const Range& b) { return a.storage == b.storage && a.begin < b.end && b.begin < a.end; }

// The data of `blob` as a range, in the floats its element type takes (8-bit and bf16 data less than count()); none
// where it has no storage yet or no values.
void AddData(const Blob& blob, std::vector<Range>* ranges) {
  if (!blob.data() || blob.count() == 0) return;
  ranges->push_back({blob.data().get(), blob.data_offset(), blob.data_offset() + blob.data_floats()});
}

bool AnyOverlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a)
    for (const Range& y : b)
      if (Overlaps(x, y)) return true;
  return false;
}

}  // namespace

std::vector<StepAccess> ForwardStepAccess(const Net& net) {
  const std::vector<PlanStep>& plan = net.plan();
  const auto& blobs = net.blobs();
  std::vector<StepAccess> access(plan.size());
  for (size_t s = 0; s < plan.size(); ++s) {
    const PlanStep& step = plan[s];
    const Layer& layer = *net.layers()[step.layer];
    std::vector<Range>& reads = access[s].reads;
    std::vector<Range>& writes = access[s].writes;
    for (int b : step.bottoms) AddData(*blobs[b], &reads);
    for (size_t t = 0; t < step.tops.size(); ++t) {
      const Blob& top = *blobs[step.tops[t]];
      AddData(top, &writes);
      // A loss top's gradient is seeded with its weight in forward.
      if (layer.loss(static_cast<int>(t)) != 0.f && top.diff() && top.count() > 0)
        writes.push_back({top.diff().get(), top.diff_offset(), top.diff_offset() + top.diff_floats()});
    }
    // Parameters: read; written where the forward updates them (BatchNorm's statistics).
    for (const auto& param : layer.params()) AddData(*param, StepWritesParams(layer) ? &writes : &reads);
    // Internal blobs may carry state from the last pass (read) and are written anew (written): both.
    for (int i : step.internals) {
      AddData(*blobs[i], &reads);
      AddData(*blobs[i], &writes);
    }
    const Blob* workspace = layer.workspace_blob();
    if (layer.workspace_floats() > 0 && workspace != nullptr && workspace->data())
      writes.push_back(
          {workspace->data().get(), workspace->data_offset(), workspace->data_offset() + layer.workspace_floats()});
    access[s].outside_effects = StepHasOutsideEffects(layer, step);
    // A step whose every top is a view of a bottom computes nothing (Split's copies, Flatten): alone it costs
    // nothing, and beside a chain it would make the chain a wide stretch, run on one lane's one thread (AlexNet's
    // label Split beside conv1 .. fc8).
    bool only_views = !step.tops.empty() && step.views.size() == step.tops.size() && step.internals.empty() &&
                      layer.workspace_floats() == 0;
    for (size_t t = 0; t < step.tops.size(); ++t) only_views = only_views && layer.loss(static_cast<int>(t)) == 0.f;
    access[s].alone = layer.ThreadCountChangesPass(/*backward=*/false) || only_views;
  }
  return access;
}

std::vector<int> BackwardSteps(const Net& net) {
  std::vector<int> steps;
  for (size_t s = net.plan().size(); s-- > 0;)
    if (net.plan()[s].needs_backward) steps.push_back(static_cast<int>(s));
  return steps;
}

std::vector<StepAccess> BackwardStepAccess(const Net& net) {
  const std::vector<PlanStep>& plan = net.plan();
  const auto& blobs = net.blobs();
  const std::vector<int> steps = BackwardSteps(net);
  std::vector<StepAccess> access(steps.size());
  const auto add_diff = [](const Blob& blob, std::vector<Range>* ranges) {
    if (!blob.diff() || blob.count() == 0) return;
    ranges->push_back({blob.diff().get(), blob.diff_offset(), blob.diff_offset() + blob.diff_floats()});
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const PlanStep& step = plan[steps[i]];
    const Layer& layer = *net.layers()[step.layer];
    std::vector<Range>& reads = access[i].reads;
    std::vector<Range>& writes = access[i].writes;
    ForEachBackwardTouch(net, step, [&](int id, bool gradient, bool write) {
      const Blob& blob = *blobs[id];
      std::vector<Range>* ranges = write ? &writes : &reads;
      if (gradient) {
        add_diff(blob, ranges);
      } else {
        AddData(blob, ranges);
      }
    });
    // Parameters: read; their gradients accumulate (read and written).
    for (const auto& param : layer.params()) {
      AddData(*param, &reads);
      add_diff(*param, &reads);
      add_diff(*param, &writes);
    }
    // Internal blobs: read, and maybe written (scratch), values and gradients alike.
    for (int k : step.internals) {
      for (std::vector<Range>* ranges : {&reads, &writes}) {
        AddData(*blobs[k], ranges);
        add_diff(*blobs[k], ranges);
      }
    }
    const Blob* workspace = layer.workspace_blob();
    if (layer.workspace_floats() > 0 && workspace != nullptr && workspace->data())
      writes.push_back(
          {workspace->data().get(), workspace->data_offset(), workspace->data_offset() + layer.workspace_floats()});
    access[i].outside_effects = std::strcmp(layer.type(), "Python") == 0;
    access[i].alone = layer.ThreadCountChangesPass(/*backward=*/true);
  }
  return access;
}

StepGraph StepGraphOf(const std::vector<StepAccess>& access) {
  const size_t n = access.size();
  StepGraph graph;
  graph.waits_for.resize(n);
  graph.depth.assign(n, 0);
  for (size_t b = 0; b < n; ++b) {
    for (size_t a = 0; a < b; ++a) {
      const bool conflict =
          access[a].alone || access[b].alone || (access[a].outside_effects && access[b].outside_effects) ||
          AnyOverlap(access[a].writes, access[b].reads) || AnyOverlap(access[a].reads, access[b].writes) ||
          AnyOverlap(access[a].writes, access[b].writes);
      if (!conflict) continue;
      graph.waits_for[b].push_back(static_cast<int>(a));
      graph.depth[b] = std::max(graph.depth[b], graph.depth[a] + 1);
    }
  }
  return graph;
}

StepGraph ArrangeForLanes(const std::vector<StepAccess>& access, std::vector<int>* order) {
  const size_t n = access.size();
  // What waits for what, leaving aside which steps run alone (that is about threads, not order).
  std::vector<StepAccess> unconstrained = access;
  for (StepAccess& step : unconstrained) step.alone = false;
  const StepGraph free = StepGraphOf(unconstrained);
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> released(n);
  for (size_t s = 0; s < n; ++s) {
    waiting[s] = static_cast<int>(free.waits_for[s].size());
    for (int before : free.waits_for[s]) released[before].push_back(static_cast<int>(s));
  }
  // Ready steps that run on lanes first, each time the earliest; a step that runs alone only when none is ready.
  std::set<int> ready_lane, ready_alone;
  const auto make_ready = [&](int s) { (access[s].alone ? ready_alone : ready_lane).insert(s); };
  for (size_t s = 0; s < n; ++s)
    if (waiting[s] == 0) make_ready(static_cast<int>(s));
  order->clear();
  while (!ready_lane.empty() || !ready_alone.empty()) {
    std::set<int>& from = ready_lane.empty() ? ready_alone : ready_lane;
    const int s = *from.begin();
    from.erase(from.begin());
    order->push_back(s);
    for (int later : released[s])
      if (--waiting[later] == 0) make_ready(later);
  }
  std::vector<StepAccess> arranged;
  arranged.reserve(n);
  for (int s : *order) arranged.push_back(access[s]);
  return StepGraphOf(arranged);
}

StepGraph ForwardStepGraph(const Net& net) { return StepGraphOf(ForwardStepAccess(net)); }

int StepGraph::Width() const {
  std::vector<int> at_depth;
  for (int d : depth) {
    if (static_cast<size_t>(d) >= at_depth.size()) at_depth.resize(d + 1, 0);
    ++at_depth[d];
  }
  return at_depth.empty() ? 0 : *std::max_element(at_depth.begin(), at_depth.end());
}

bool StepGraph::Allows(const std::vector<int>& order) const {
  std::vector<int> position(size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0 || static_cast<size_t>(order[i]) >= size() || position[order[i]] >= 0) return false;
    position[order[i]] = static_cast<int>(i);
  }
  if (order.size() != size()) return false;
  for (size_t s = 0; s < size(); ++s)
    for (int before : waits_for[s])
      if (position[before] > position[s]) return false;
  return true;
}

std::string StepGraph::Describe(const Net& net) const {
  std::vector<std::vector<int>> by_depth;
  for (size_t s = 0; s < size(); ++s) {
    if (static_cast<size_t>(depth[s]) >= by_depth.size()) by_depth.resize(depth[s] + 1);
    by_depth[depth[s]].push_back(static_cast<int>(s));
  }
  size_t widest = 0;
  for (size_t d = 1; d < by_depth.size(); ++d)
    if (by_depth[d].size() > by_depth[widest].size()) widest = d;
  std::ostringstream out;
  out << size() << " steps, " << by_depth.size() << " deep, at most " << Width() << " at once";
  if (!by_depth.empty() && by_depth[widest].size() > 1) {
    out << " (depth " << widest << ":";
    for (size_t i = 0; i < by_depth[widest].size() && i < 6; ++i)
      out << (i ? ", " : " ") << net.layer_names()[net.plan()[by_depth[widest][i]].layer];
    if (by_depth[widest].size() > 6) out << ", ...";
    out << ")";
  }
  return out.str();
}

}  // namespace crema
