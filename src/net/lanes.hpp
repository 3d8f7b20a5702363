// Execution lanes on the CPU: the steps of a pass that wait for nothing unfinished run at the same time, each on a
// lane (a thread of its own), in any order the step graph allows (net/step_graph.hpp), so the results are the
// sequential ones bit for bit: every step still reads exactly the bytes it read in the plan's order, and each step's
// own arithmetic is the same (a forward's results do not depend on how many threads run it: oneDNN's forward kernels
// split their outputs, not their sums, over threads; tests check it on every example net).
//
// A pass is cut into stretches. A step every other step is ordered with (it waits for all before it and all after it
// wait for it: GoogLeNet's concatenations, the stem's convolutions) runs alone on the calling thread with all of
// OpenMP's threads, as without lanes. The steps between two such steps form a wide stretch (an inception module's
// towers) and run on the lanes: one OpenMP parallel region of up to `lanes` threads, each taking the ready step
// that heads the longest remaining chain (measured step times), running it on one thread (a nested parallel region,
// oneDNN's included, takes one thread), and readying what waited for it.
//
// Whether a stretch pays on lanes depends on the machine and the batch: two threads on one small convolution waste
// much of the second (GoogLeNet at batch 1), while a large one splits well. In the automatic mode each wide stretch
// is timed both ways over its first passes and keeps the faster; an explicit lane count always uses lanes.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "net/step_graph.hpp"

namespace crema {

class Net;

// One step as it ran on the lanes in the last recorded pass (StepLanes::set_recording).
struct LaneRecord {
  int step = -1;
  int lane = -1;        // 0 .. lanes-1; -1: ran alone on the calling thread
  double start_ms = 0;  // since the pass began
  double end_ms = 0;
};

class StepLanes {
 public:
  // `lanes`: the most steps at once (1: every step in order on the calling thread). `automatic`: each wide stretch
  // chooses, by timing its first passes both ways, whether it runs on lanes.
  void Configure(int lanes, bool automatic);
  int lanes() const { return lanes_; }

  // Takes the graph of the steps to run (indices 0 .. n-1, each waiting only for smaller ones): the stretches and
  // what waits for what. Timings and choices start over.
  void Prepare(const StepGraph& graph);
  bool prepared() const { return prepared_; }
  void Invalidate() { prepared_ = false; }
  // Whether every wide stretch has chosen how it runs (always, unless automatic).
  bool settled() const;

  // Runs every step once: `run(step)` runs it and returns true, or returns false without running it, which stops the
  // lanes (a step found its bottoms changed shape: the caller runs the rest in order). Returns the steps left unrun
  // (empty when all ran), in increasing order. An exception from a step stops the lanes and is rethrown here once
  // the running steps have finished.
  std::vector<int> Run(const std::function<bool(int)>& run);

  // While on, Run records when and on which lane each step ran (the last pass only), for crema time.
  void set_recording(bool on) { recording_ = on; }
  const std::vector<LaneRecord>& record() const { return record_; }
  // "2 lanes; 9 of 9 wide stretches run on them (54 steps); 38% of the pass had steps running at once": from the
  // recorded pass.
  std::string Describe() const;
  // The wide stretches: steps [begin, end), and in the automatic mode the best time each way over the timed passes
  // (0 until timed) and the choice.
  struct WideStretch {
    int begin = 0, end = 0;
    double in_order_ms = 0, lanes_ms = 0;
    bool on_lanes = false;
  };
  std::vector<WideStretch> wide_stretches() const;

 private:
  struct Stretch {
    int begin = 0, end = 0;  // steps [begin, end)
    bool wide = false;
    // Automatic mode: passes timed each way so far, and the best time each way.
    int timed_alone = 0, timed_lanes = 0;
    double best_alone = 0, best_lanes = 0;
    bool decided = false, on_lanes = true;
  };
  bool RunStretch(Stretch& stretch, const std::function<bool(int)>& run, std::vector<bool>* done,
                  std::chrono::steady_clock::time_point pass_start);
  bool UseLanes(const Stretch& stretch) const;

  int lanes_ = 1;
  bool automatic_ = false;
  bool prepared_ = false;
  bool recording_ = false;
  std::vector<Stretch> stretches_;
  std::vector<std::vector<int>> waited_by_;  // per step: the later steps that wait for it
  std::vector<double> cost_ms_;              // per step: its last measured time (the priority of a ready step)
  std::vector<LaneRecord> record_;
};

}  // namespace crema
