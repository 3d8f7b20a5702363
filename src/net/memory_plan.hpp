// The memory plan: which of a net's buffers share memory, and where each lies in one arena.
//
// From the lifetimes of one pass (net/lifetimes.hpp: forward only, forward and backward, or forward and backward with
// replays: net/schedule.hpp), buffers whose lifetimes do not overlap may use the same bytes. The planner
//   - takes the buffers it may move: those a blob of the plan owns (views follow their owner), that the pass
//     writes before it reads them, and that nobody outside the pass reads. It leaves with memory of their own the
//     net's inputs (their gradients too: the caller reshapes an input itself) and outputs, the tops of layers
//     without bottoms (data layers fill them, on the host), the blobs a caller keeps (MemoryPlanOptions::keep), the
//     internal blobs that carry values from one pass into the next (Layer::InternalLifetime), and every buffer
//     read before it is written (a gradient no step contributes to keeps its zeros);
//   - runs element layers in place where it can: a layer that allows it (Layer::PlanMayRunInPlace) writes its
//     top i into the memory of its bottom i when the pass touches that bottom for the last time at this step
//     (and in backward, the gradient of bottom i into that of top i); such a chain is one buffer (in a recompute
//     pass, where the two overlap only where this step runs, in forward or in its replay);
//   - gives each step's workspace (its layer's scratch, Layer::RequestWorkspace) a slot of its own, live only at the
//     positions where the step runs, instead of one buffer shared by every layer for the net's life;
//   - places the buffers in one arena by offset: largest first, each in the smallest gap that fits among those
//     already placed whose lifetimes overlap its own (best fit; a lifetime may be several intervals), offsets and
//     sizes rounded to kArenaAlignment (oneDNN's and cuDNN's alignment; the size classes).
// For recompute, ComputeRecomputePlan chooses the segments: it plans several and keeps the smallest.
// The same plan serves host and device memory: the arena is one SyncedMemory, and the blobs are views of it.
// Net::PlanMemory binds a plan; this file only computes one.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "net/lifetimes.hpp"
#include "net/schedule.hpp"

namespace crema {

constexpr size_t kArenaAlignment = 256;  // bytes

struct MemoryPlanOptions {
  bool with_backward = false;  // plan a forward and backward pass (training), or forward only
  std::set<int> keep;          // blob ids whose values stay readable after the pass, each with memory of its own
  // The pass's order of steps; with no events, the plain one (PlainSchedule).
  PassSchedule schedule;
  // Whether forward steps the pass's dependencies leave unordered may run at once (execution lanes; backward runs in
  // order): buffers then share
  // bytes only where every touch of one comes before every touch of the other in every order the lanes may take
  // (PassOrder), and a step's bottom is run in place only where every other touch of it comes before the step.
  bool concurrent = false;
};

struct PlannedBuffer {
  const SyncedMemory* memory = nullptr;  // the storage the owner has now
  int owner = -1;                        // the blob id that owns it (the others view it)
  std::vector<int> blob_ids;             // every blob using it, the owner and its views
  bool gradient = false;
  size_t bytes = 0;
  int first = -1, last = -1;                   // positions in the pass
  std::vector<std::pair<int, int>> intervals;  // where its values live (BufferLifetime::intervals)
  size_t offset = 0;          // bytes into the arena
  bool in_place = false;      // takes over the memory of the buffer its step read for the last time
  // Whether a buffer written later in the forward pass reuses some of its bytes: its values are gone once forward
  // ends (the non-finite search skips it).
  bool reused_in_forward = false;
};

// A step's workspace (Layer::RequestWorkspace): a slot of the arena where its layer's calls find scratch.
struct PlannedWorkspace {
  int step = -1;
  size_t bytes = 0;
  std::vector<int> positions;  // where the step runs: its only intervals, one position each
  size_t offset = 0;
};

struct MemoryPlan {
  bool with_backward = false;
  bool concurrent = false;             // planned for lanes (MemoryPlanOptions::concurrent)
  PassSchedule schedule;               // the order the pass runs its steps in (replays: recompute)
  NetLifetimes lifetimes;              // of every buffer the pass touches, each with memory of its own
  std::vector<PlannedBuffer> buffers;  // the buffers bound into the arena
  std::vector<PlannedWorkspace> workspaces;  // the steps' workspaces, in the arena too
  size_t arena_bytes = 0;
  // Every buffer the pass touches with memory of its own, and one workspace the size of the largest request: what
  // the net holds without a plan. (The net sets it to what it holds with memory_plan: NONE, before layers share kept
  // values: Net::ShareKeptInputs.)
  size_t unplanned_bytes = 0;
  size_t unplanned_workspace_bytes = 0;  // of which the shared workspace
  // The buffers the plan leaves with memory of their own (inputs, outputs, kept blobs, carried state...).
  size_t kept_bytes = 0;
  size_t planned_bytes() const { return arena_bytes + kept_bytes; }
  int in_place = 0;  // buffers run in place by the plan
};

// Why a net is not planned ("" when it can be): a layer whose tops' shapes follow its bottoms' values (Filter)
// would need the arena to grow mid-pass.
std::string MemoryPlanRefusal(const Net& net);

// The plan for `net`'s steps and storages as they are now.
MemoryPlan ComputeMemoryPlan(const Net& net, const MemoryPlanOptions& options);

struct RecomputeOptions {
  std::vector<bool> recomputable;  // per step (RecomputableSteps)
  // The most bytes the plan may take (planned_bytes); 0: as few as the segments give.
  size_t budget_bytes = 0;
};
// A plan for forward and backward with recompute (`options.with_backward` is taken as true). Segments come from
// Chen et al.'s greedy rule (GreedySegments) with segment sizes around their square-root rule's (n steps of equal
// size m in sqrt(n) segments: sqrt(n m * m) bytes each), scaled over a range; each is planned and the smallest plan
// is kept. Then the segments backward reaches first are stored whole (no replay) as long as the plan stays within
// the budget, or without one within that smallest plan (a segment whose values cost no byte at the peak is not run
// twice), so the fewest steps run twice. Where nothing can be recomputed, the plan is the plain
// one.
MemoryPlan ComputeRecomputePlan(const Net& net, const MemoryPlanOptions& options, const RecomputeOptions& recompute);

}  // namespace crema
