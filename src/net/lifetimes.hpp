// Lifetimes: when, in one pass over a built net, each of its buffers is first and last touched. This is the
// analysis a memory plan starts from (buffers whose lifetimes do not overlap can share memory); nothing here
// moves memory yet.
//
// A pass is a sequence of positions, one per event of its schedule (net/schedule.hpp): forward step s at position s
// (0 .. S-1), and, for a plain training pass, the backward of step s at position 2S-1-s (backward runs the steps in
// reverse); a recompute pass puts each segment's replays before its backward. A buffer is one storage: a blob's
// data, or its gradient; a top that is a view of a bottom shares the bottom's buffer (Flatten, Split's copies).
// Parameters, their gradients and the workspace are live throughout and are not listed.
//
// A buffer is touched where a step writes or reads it:
//   forward    a step's bottoms (read) and tops (written), its internal blobs (written where the layer declares
//              them kUntilBackward, else read: they may carry state from the last pass); a loss top's
//              gradient (written: the loss weight is seeded there); the net's inputs, read from the start (the
//              caller fills them), its outputs, read at the end;
//   backward   (steps that run backward) the top gradients it reads and the bottom gradients it writes, its
//              internal blobs, and the bottom and top data its layer declares its backward reads
//              (Layer::BackwardReadsBottom / BackwardReadsTop); run in place, the one blob is read where the
//              layer says its backward reads it (Layer::BackwardReadsInPlace: not where it keeps a copy of its
//              input and reads the copy);
//   replay     (recompute) as forward.
// A buffer lives from a write to the last read before the next write that does not also read it (a replay writes
// anew what forward wrote): each such stretch is one interval, and between them its memory is free.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "net/net.hpp"
#include "net/schedule.hpp"

namespace crema {

struct BufferLifetime {
  std::string blob;       // the net's name for a blob using the buffer (the first the pass touches)
  bool gradient = false;  // the blob's gradient rather than its data
  size_t bytes = 0;
  int first = -1;  // positions, inclusive: from the first touch to the last
  int last = -1;
  std::vector<std::pair<int, int>> intervals;  // where its values live, inclusive, ascending, within [first, last]
  // Whether the pass reads the buffer before anything in it writes it: the net's inputs (the caller filled them),
  // a gradient no later step contributes to (it holds the zeros it was made with), a layer's state from the last
  // pass. Such a buffer carries values into the pass, so its memory cannot be shared with another's.
  bool read_first = false;
  const SyncedMemory* memory = nullptr;  // the storage itself
  std::vector<int> blob_ids;             // the blobs whose data (or gradient) it is, views included
  // Every (position, write) of a step, in the order met; not the read of the net's outputs once the pass has ended
  // (that keeps an output alive to the last position, but no step there reads it: it orders nothing).
  std::vector<std::pair<int, bool>> touches;
};

struct NetLifetimes {
  int positions = 0;                    // the schedule's events: S forward, or 2S with backward, more with replays
  std::vector<BufferLifetime> buffers;  // every buffer the pass touches, each once
  size_t total_bytes = 0;               // all of them: what a net holds when every buffer has memory of its own
  size_t peak_live_bytes = 0;           // the most bytes live at one position: no memory plan can use less
  int peak_position = -1;
};

// The lifetimes of the buffers of `net`'s steps as they are now, in a pass that runs `schedule` (only steps with
// needs_backward run backward).
NetLifetimes ComputeLifetimes(const Net& net, const PassSchedule& schedule);
// For a plain forward pass (`with_backward` false: testing, inference) or forward and backward pass (training).
NetLifetimes ComputeLifetimes(const Net& net, bool with_backward);

// Which events of a pass must come before which when independent events may run at once (execution lanes): p comes
// before q where a chain of dependencies leads from p to q, each link one buffer that p writes and q touches
// later, or that p reads and q writes later; a parameter's gradient that both accumulate into (backward of shared
// parameters); a parameter a forward writes (StepWritesParams); or effects beyond their blobs in both
// (StepHasOutsideEffects). Events no chain links may run in either order, or at once. The memory plan for lanes
// shares bytes only between buffers whose every touch is so ordered (net/memory_plan.hpp).
class PassOrder {
 public:
  PassOrder() = default;
  explicit PassOrder(int positions);
  void AddEdge(int from, int to);
  // Every position before `at` comes before every position from `at` on (the end of forward).
  void AddBarrier(int at);
  // Takes the closure of the edges and barriers added (call once, after the last).
  void Close();
  int positions() const { return positions_; }
  // Whether p comes before q (p < q and a chain of edges leads from p to q).
  bool Before(int p, int q) const;
  bool Ordered(int p, int q) const { return p == q || Before(std::min(p, q), std::max(p, q)); }
  // Sets in `bits` (one bit per position) every position that may run at the same time as p.
  void AddUnorderedWith(int p, std::vector<uint64_t>* bits) const;

 private:
  int positions_ = 0;
  size_t words_ = 0;
  std::vector<uint64_t> before_, after_;  // per position, a bitset of positions before it / after it
  std::vector<std::pair<int, int>> edges_;
  std::vector<int> barriers_;
};
// Besides the chains above, backward begins once forward has ended (a barrier). (A step that runs alone on all the
// threads, Layer::ThreadCountChangesPass, runs beside no other, but in any order its chains allow.)
PassOrder ComputePassOrder(const Net& net, const PassSchedule& schedule, const NetLifetimes& lifetimes);

// What the backward of `step` touches among the net's blobs, as the lifetimes above take it: `touch(blob, gradient,
// write)` for its tops' gradients and the data its layer declares its backward reads (read), its internal blobs
// (read), and the gradients of the bottoms it propagates to (written). The step graph adds the parameters and the
// workspace (net/step_graph.hpp).
void ForEachBackwardTouch(const Net& net, const PlanStep& step,
                          const std::function<void(int id, bool gradient, bool write)>& touch);

// A step whose layer has effects beyond the blobs it reads and writes: a source of data (its reader's queue and
// position), a Python layer (the interpreter, and whatever the user's code keeps). Such steps run one at a time, in
// the plan's order.
bool StepHasOutsideEffects(const Layer& layer, const PlanStep& step);
// A step whose forward writes its layer's parameters (BatchNorm's running statistics).
bool StepWritesParams(const Layer& layer);

// Whether two lists of intervals (inclusive, ascending) share a position.
bool IntervalsOverlap(const std::vector<std::pair<int, int>>& a, const std::vector<std::pair<int, int>>& b);

}  // namespace crema
