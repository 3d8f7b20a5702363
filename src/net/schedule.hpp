// Schedules: the order in which one pass over a built net runs its steps, and, for recompute, which steps run
// their forward a second time.
//
// A plain pass runs every step forward, then (training) every step backward in reverse. A recompute pass (Chen et
// al., "Training Deep Nets with Sublinear Memory Cost", 2016) cuts the plan into segments: forward runs whole,
// and then, from the last segment to the first, the steps of a segment whose values its backward reads run forward
// again ("replay"), just before the segment's backward. The values a segment's backward reads then need not live
// from forward to backward: only what crosses into a segment from before it does. The memory plan
// (net/memory_plan.hpp) sees this through the lifetimes of the schedule (net/lifetimes.hpp): a value written in
// forward, read there and written again in a replay lives twice, and its memory is free in between.
//
// Exactness. A replay must write bit for bit what forward wrote: a step replays only where every value it reads is
// the one it read in forward, and its layer says its forward can run again so (Layer::Replayable: it draws the same
// random numbers and leaves its state, such as BatchNorm's running statistics, as the first run left it; see
// Layer::Replay). Hence:
//   - a cut lies only where no value crosses it that a later step overwrites (an in-place chain such as
//     Convolution -> BatchNorm -> Scale -> ReLU on one blob is never cut: the value at the cut would be gone);
//   - a step replays when its backward, or a later replay, reads what it writes; and when it replays, so does every
//     later step of its segment that writes the same blob (in place), so the blob ends as forward left it;
//   - a value a replay needs from a step that may not replay (a recurrent layer, a layer marked recompute: false)
//     must survive from forward, unwritten since; where it does not, the segment is not recomputed at all.
#pragma once

#include <string>
#include <vector>

namespace crema {

class Net;

struct PassEvent {
  enum class Kind { kForward, kReplay, kBackward };
  Kind kind = Kind::kForward;
  int step = 0;
};

struct PassSchedule {
  bool with_backward = false;
  std::vector<PassEvent> events;  // forward of every step first (positions 0 .. S-1), then the rest
  std::vector<int> segments;      // recompute: the first step of each segment, ascending (empty for a plain pass)
  std::vector<bool> replayed;     // per step: its forward runs again in backward
  int replays = 0;                // steps replayed
};

// Forward of every step in order; with backward, then every step's backward in reverse.
PassSchedule PlainSchedule(const Net& net, bool with_backward);

// Whether a layer of `net` is marked recompute: true (which asks for recompute in a net whose plan is SHARE).
bool LayerMarkedRecompute(const Net& net);

// The steps that may run forward again: those with bottoms whose layer can (Layer::Replayable) and, by their
// layer's recompute mark, or else by `net_recomputes`, should.
std::vector<bool> RecomputableSteps(const Net& net, bool net_recomputes);

// The positions between steps where a segment may begin (step indices a, 0 < a < S): no blob written before a and
// written again at or after a (an in-place chain) crosses it.
std::vector<int> SegmentCuts(const Net& net);

// Segment starts from `cuts` by Chen et al.'s greedy rule: walking forward, a segment ends at the first cut after its
// steps have written more than `segment_bytes` of values (tops and internal blobs, each storage once).
std::vector<int> GreedySegments(const Net& net, const std::vector<int>& cuts, double segment_bytes);

// The training schedule for segments beginning at `segments` (ascending, each a cut; 0 may be left out), replaying
// only `recomputable` steps, and none in the last `stored_tail` segments (backward reaches those first: their
// values are kept). A segment whose replay cannot be exact (see above) is stored too.
PassSchedule RecomputeSchedule(const Net& net, std::vector<int> segments, const std::vector<bool>& recomputable,
                               int stored_tail = 0);

// "forward", "replay" or "backward".
const char* EventName(PassEvent::Kind kind);

}  // namespace crema
