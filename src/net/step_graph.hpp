// The step graph: which steps of a pass (forward, or backward) must run before which, from the memory each step
// reads and writes. It is what execution lanes (several steps at once: GoogLeNet's inception towers, a Siamese
// net's two towers) start from (net/lanes.hpp).
//
// Memory, not blob names: under a memory plan two blobs may share bytes of the arena (their lifetimes did not
// overlap in the sequential order), a view (Flatten, Split's copies, Reshape) shares its bottom's storage, an
// in-place step reads and writes one buffer, and every step that uses the net's shared workspace writes the same
// scratch. So each step's reads and writes are byte ranges of storages (a SyncedMemory and an offset), and step b
// waits for an earlier step a wherever
//   - a writes what b reads (b needs a's result),
//   - a reads what b writes (b must not overwrite a's input before a read it), or
//   - both write the same bytes (the later value must be the one left);
// a step whose layer has effects beyond its blobs (a data layer's queue, a Python layer's interpreter, a random
// stream shared by the context) waits for every earlier step of that kind, and a step whose results change with
// the thread count (Layer::ThreadCountChangesPass) waits for every earlier step and every later one waits for it
// (it runs alone on all the threads). Running the steps in any order that keeps these edges gives the sequential
// results bit for bit, since every step still sees exactly the bytes it saw and computes them as it did.
#pragma once

#include <string>
#include <vector>

namespace crema {

class Net;

struct StepGraph {
  // Per step of the plan: the earlier steps it waits for directly (after removing edges implied by others is not
  // attempted: a step lists every earlier step it conflicts with, in increasing order).
  std::vector<std::vector<int>> waits_for;
  // Per step: its depth, the longest chain of waits before it (0: it waits for nothing).
  std::vector<int> depth;

  size_t size() const { return waits_for.size(); }
  // The most steps of one depth: how many could run at once in the widest part of the pass.
  int Width() const;
  // Whether running the steps in `order` (a permutation of the steps) keeps every edge.
  bool Allows(const std::vector<int>& order) const;
  // "12 steps, 9 deep, at most 4 at once (depth 3: conv2a, conv2b, ...)": for crema time.
  std::string Describe(const Net& net) const;
};

// What one step of a forward pass reads and writes: floats [begin, end) of a storage (a SyncedMemory).
struct StepRange {
  const void* storage = nullptr;
  size_t begin = 0, end = 0;
};
struct StepAccess {
  std::vector<StepRange> reads, writes;
  bool outside_effects = false;  // a data source or a Python layer (StepHasOutsideEffects)
  // Runs beside no other step: its results change with the thread count, or (forward) it computes nothing (every top
  // a view), so alone it costs nothing and it does not make a chain beside it look wide.
  bool alone = false;
};
// Per step of `net`'s forward pass, what it reads and writes as its memory is bound now: the ground the graph is made
// from (tests check that a step writes nothing else).
std::vector<StepAccess> ForwardStepAccess(const Net& net);

// The graph of `net`'s forward pass as its memory is bound now (memory plan, layouts, workspaces): rebuild it after
// anything rebinds the memory.
StepGraph ForwardStepGraph(const Net& net);

// Backward: the steps that run backward (PlanStep::needs_backward), in the order backward runs them (the plan's,
// reversed); step i of BackwardStepAccess is plan step BackwardSteps(net)[i] (ArrangeForLanes makes the graph). A
// backward reads its tops' gradients, the data its layer declares it reads (Layer::BackwardReadsBottom /
// BackwardReadsTop / BackwardReadsInPlace, as the memory plan's lifetimes), its parameters and internal blobs, and
// writes the gradients of the bottoms it propagates to, its parameters' gradients (which accumulate: shared parameters'
// steps run one after another), its internal blobs and its workspace. A Python layer's backward runs the
// interpreter (outside effects).
std::vector<int> BackwardSteps(const Net& net);
std::vector<StepAccess> BackwardStepAccess(const Net& net);

// The graph of steps with these reads and writes, in this order (both passes use it).
StepGraph StepGraphOf(const std::vector<StepAccess>& access);

// The order execution lanes run a pass in: `order` lists the steps of `access` (indices into it) in an order that
// keeps every edge, and the graph returned is the graph of the steps in that order. A step that runs alone
// (StepAccess::alone) may run at any point its edges allow, but nothing runs beside it: so the order puts it where
// it holds up least, after every step that runs on lanes and is ready (earliest first), and the steps between two
// alone steps form the stretches the lanes run at once. (A backward in the plan's reverse order would put each
// inception tower's convolutions, which run alone, between the towers' other steps.) With no alone step it is the
// given order.
StepGraph ArrangeForLanes(const std::vector<StepAccess>& access, std::vector<int>* order);

}  // namespace crema
